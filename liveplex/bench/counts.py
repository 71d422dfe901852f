"""Exact tick counts without a GPU: kernels (aten ops), host synchronisations and attention KV bytes.

Issue 14. A tick's fixed cost on the GPU is its graph nodes, its stalls are its host syncs and
its bandwidth is mostly the KV attention reads; all three are properties of the code and its
shapes, not of the hardware, so they are counted exactly on the CPU or on the meta device (real
shapes, no memory) with two dispatch modes:

- **ops**: every aten op the dispatcher runs, except those that launch no kernel (views, aliases,
  allocations, metadata). `F.scaled_dot_product_attention` and `F.rms_norm` count as one op each:
  on CUDA each is one fused kernel, while on the CPU and meta device they decompose (and the
  attention's output keeps the fused kernels' layout, `_fused_layout`). A `liveplex::` custom op
  (`personaplex.kernels`) counts as one, under its qualified name: on CUDA it is one Triton
  kernel, and what its fake (meta) or CPU implementation runs inside it is not counted. The
  served code calls one only where it is that kernel (`kernels.fusion`: CUDA, and the meta
  device that stands for it), so a CPU count is of the eager ops the CPU runs.
- **syncs**: anything that makes the host wait for the device on CUDA: reading a device value
  (`item`, `tolist`, `numpy`, `cpu`, `bool`/`int`/`float` of a tensor), data-dependent shapes
  (`nonzero`, ...), a copy between the device and host memory that is not one of the declared
  `staging` buffers (pinned on CUDA, so the copy is asynchronous), creating a device tensor from host
  data, and a copy from the device into a staging buffer (the host then waits for it: the one
  sync a tick needs). On the CPU "device" memory is told apart from host memory by taint: the
  `device` tensors given and everything computed from them.
- **kv_bytes**: what attention reads of K and V: the whole K and V given to a dense attention
  (a mask skips nothing), and for the varlen flash kernel (and the 8-bit ring's, `liveplex::kv8_attend`)
  only each row's `seqused_k` keys. On the
  meta device `seqused_k` has no values; `kv_bytes` then counts the dense upper bound and
  `kv_unknown` says so.

On the CPU the flash kernel (CUDA only) runs by a reference implementation, so the CUDA path's
code runs and is checked on the CPU too.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten

_NO_KERNEL = {
    aten._unsafe_view, aten.detach, aten.alias, aten.lift_fresh, aten.empty, aten.empty_like,
    aten.empty_strided, aten.new_empty, aten.new_empty_strided, aten.set_, aten.resize_,
}
_DATA_DEPENDENT = {aten.nonzero, aten.masked_select, aten.unique_consecutive, aten._unique2, aten.unique_dim}
_FUSED_ON_CUDA = {F.scaled_dot_product_attention: "fused_sdpa", F.rms_norm: "fused_rms_norm"}
"""Composite functions that are one kernel on CUDA but decompose elsewhere."""
_CUSTOM = "liveplex"
"""The namespace of the fused kernels' custom ops: one Triton kernel each on CUDA."""
_KV8_ATTEND = "kv8_attend"
"""The 8-bit ring's varlen attention (`personaplex.kernels.kv8`): it reads each group's `used`
keys of one byte per value, as flash reads two (its CPU composition gathers a dense copy first,
which is not counted: on the CPU an 8-bit ring's `flash` reads count only on the meta device)."""
_READS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.cpu, torch.Tensor.__bool__,
          torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__}
_UPLOADS = {torch.tensor, torch.as_tensor}


@dataclasses.dataclass(slots=True)
class Counts:
    """What one counted region did."""

    ops: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """Kernel-launching aten ops by name."""
    syncs: list[str] = dataclasses.field(default_factory=list)
    """Each host synchronisation, named by its cause, in order."""
    kv_bytes: int = 0
    """Bytes of K and V the attention kernels read."""
    kv_unknown: bool = False
    """A varlen kernel ran on the meta device, where `seqused_k` has no values: `kv_bytes` counted
    `max_k` keys per group, its upper bound."""

    @property
    def total_ops(self) -> int:
        return sum(self.ops.values())


def _tensors(tree: object) -> list[torch.Tensor]:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class _Memory:
    """Which tensors are device memory: non-CPU ones, and on the CPU the tainted storages."""

    def __init__(self, device: Iterable[torch.Tensor], staging: Iterable[torch.Tensor],
                 kv: Iterable[torch.Tensor]) -> None:
        self.tainted = {_storage(t) for t in device if t.device.type == "cpu"}
        self.staging = {_storage(t) for t in staging}
        self.kv = {id(t.untyped_storage()) if t.device.type == "meta" else _storage(t) for t in kv}

    def counts_kv(self, key: torch.Tensor) -> bool:
        """Whether attention reads of `key` count (all of them when no `kv` pool was given)."""
        if not self.kv:
            return True
        return (id(key.untyped_storage()) if key.device.type == "meta" else _storage(key)) in self.kv

    def on_device(self, t: torch.Tensor) -> bool:
        if t.device.type != "cpu":
            return True
        ptr = _storage(t)
        return ptr in self.tainted and ptr not in self.staging

    def is_staging(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu" and _storage(t) in self.staging

    def taint(self, outputs: list[torch.Tensor]) -> None:
        self.tainted.update(_storage(t) for t in outputs if t.device.type == "cpu")


class _Dispatch(TorchDispatchMode):
    def __init__(self, counts: Counts, memory: _Memory) -> None:
        super().__init__()
        self.counts, self.memory = counts, memory
        self.fused = 0
        """Depth inside a function counted as one fused kernel."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        inputs = _tensors((args, kwargs))
        if packet is aten._flash_attention_forward:
            out = self._flash(func, args, kwargs)
        elif func.namespace == _CUSTOM and packet.__name__ == _KV8_ATTEND:
            q, packed, _scale, _cu_q, cu_k, used, _max_q, max_k = args[:8]
            if self.memory.counts_kv(packed):
                self.counts.kv_bytes += self._flash_keys(packed, cu_k, max_k, used) * packed[0].numel()
            out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        if any(self.memory.on_device(t) for t in inputs) or (
                packet is aten._to_copy and self.memory.is_staging(args[0])):  # an upload: device memory
            self.memory.taint(_tensors(out))
        if self.fused:
            return out
        if packet is aten._local_scalar_dense:
            if self.memory.on_device(args[0]):
                self.counts.syncs.append("read a device value")
        elif packet in _DATA_DEPENDENT:
            self.counts.syncs.append(f"data-dependent shape ({packet.__name__})")
        elif packet in (aten._to_copy, aten.copy_) and self._crosses(func, args, kwargs):
            self.counts.syncs.append("copy between host and device memory")
        if func.namespace == _CUSTOM:
            self.counts.ops[f"{_CUSTOM}::{packet.__name__}"] += 1
        elif not (func.is_view or packet in _NO_KERNEL or packet is aten._local_scalar_dense
                  or func.namespace == "prim"):
            self.counts.ops[packet.__name__] += 1
        return out

    def _crosses(self, func: Any, args: tuple, kwargs: dict) -> bool:
        """A cross-memory copy seen at dispatch level (the meta device; the CPU is checked at the
        function level, where staging buffers are known)."""
        src = args[1] if func.overloadpacket is aten.copy_ else args[0]
        dst_device = args[0].device if func.overloadpacket is aten.copy_ else kwargs.get("device", src.device)
        if src.dim() == 0 and src.device.type == "cpu":
            return False  # a scalar argument, passed by value
        crosses = (src.device.type == "cpu") != (torch.device(dst_device).type == "cpu")
        staged = self.memory.is_staging(src) or (func.overloadpacket is aten.copy_ and self.memory.is_staging(args[0]))
        return crosses and not staged

    def _flash_keys(self, k: torch.Tensor, cu_k: torch.Tensor, max_k: int, used: torch.Tensor | None) -> int:
        """Keys the varlen kernel reads: each group's `used` (upper bound `max_k` on the meta device)."""
        if used is None:
            return k.shape[0]
        if used.device.type == "meta":
            self.counts.kv_unknown = True
            return (cu_k.shape[0] - 1) * max_k
        return int(used.sum())

    def _flash(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Count the varlen flash kernel's reads; on the CPU run it by a reference implementation."""
        q, k, v, cu_q, cu_k, _max_q, max_k, _dropout, causal = args[:9]
        used = kwargs.get("seqused_k")
        if self.memory.counts_kv(k):
            per_key = 2 * k.shape[-2] * k.shape[-1] * k.element_size()
            self.counts.kv_bytes += self._flash_keys(k, cu_k, max_k, used) * per_key
        if q.device.type != "cpu":
            return func(*args, **kwargs)
        return reference_flash_varlen(q, k, v, cu_q, cu_k, causal, used, kwargs.get("scale"))


def reference_flash_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor,
                           cu_k: torch.Tensor, causal: bool, used: torch.Tensor | None,
                           scale: float | None) -> tuple[torch.Tensor, ...]:
    """`aten._flash_attention_forward`'s varlen contract, row group by row group, on the CPU.

    Group b has queries cu_q[b]..cu_q[b+1] and keys from cu_k[b], `used[b]` of them (else up to
    cu_k[b+1]); causal masks align the last query with the last key (flash's bottom-right rule).
    """
    out = torch.empty_like(q)
    for b in range(cu_q.numel() - 1):
        q0, q1, k0 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b])
        n = int(used[b]) if used is not None else int(cu_k[b + 1]) - k0
        qb, kb, vb = (t.transpose(0, 1)[None] for t in (q[q0:q1], k[k0:k0 + n], v[k0:k0 + n]))
        mask = None
        if causal:
            rows = torch.arange(q1 - q0)[:, None] + (n - (q1 - q0))
            mask = torch.arange(n)[None, :] <= rows
        out[q0:q1] = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale)[0].transpose(0, 1)
    lse = torch.empty(q.shape[1], q.shape[0])
    return out, lse, torch.empty(2, dtype=torch.uint64), torch.empty((), dtype=torch.uint64), torch.empty(0)


def _fused_layout(out: torch.Tensor) -> torch.Tensor:
    """SDPA's output [B, H, T, D] laid out as the fused kernels (CUDA's flash and efficient ones, and
    the CPU's) write it, [B, T, H, D] in memory, so that a head merge after it is a view there as
    here; the meta device's decomposition writes [B, H, T, D] and would add a copy no GPU makes."""
    return out.transpose(1, 2).contiguous().transpose(1, 2)


class _Function(TorchFunctionMode):
    def __init__(self, dispatch: _Dispatch, counts: Counts, memory: _Memory) -> None:
        super().__init__()
        self.dispatch, self.counts, self.memory = dispatch, counts, memory

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.dispatch.fused:
            return func(*args, **kwargs)
        if func in _FUSED_ON_CUDA:
            if func is F.scaled_dot_product_attention and self.memory.counts_kv(args[1]):
                key, value = args[1], args[2]
                self.counts.kv_bytes += key.numel() * key.element_size() + value.numel() * value.element_size()
            self.dispatch.fused += 1
            try:
                out = func(*args, **kwargs)
                if func is F.scaled_dot_product_attention:
                    out = _fused_layout(out)
            finally:
                self.dispatch.fused -= 1
            if any(self.memory.on_device(t) for t in _tensors((args, kwargs))):
                self.memory.taint(_tensors(out))
            self.counts.ops[_FUSED_ON_CUDA[func]] += 1
            return out
        if func in _READS and self.memory.on_device(args[0]):
            self.counts.syncs.append(f"read a device tensor ({func.__name__})")
        elif func in _UPLOADS and kwargs.get("device") is not None and torch.device(kwargs["device"]).type != "cpu":
            self.counts.syncs.append(f"device tensor from host data ({func.__name__})")
        elif func in (torch.Tensor.copy_, torch.Tensor.__setitem__) and args[0].device.type == "cpu":
            self._cpu_copy(args[0], args[1] if func is torch.Tensor.copy_ else args[2])
        return func(*args, **kwargs)

    def _cpu_copy(self, dst: torch.Tensor, src: object) -> None:
        """On the CPU, a copy's direction is told by taint and the staging set."""
        if not isinstance(src, torch.Tensor) or src.dim() == 0:
            return
        if self.memory.on_device(dst) and not self.memory.on_device(src) and not self.memory.is_staging(src):
            self.counts.syncs.append("device tensor from pageable host memory")
        elif self.memory.is_staging(dst) and self.memory.on_device(src):
            self.counts.syncs.append("download into staging (the host waits)")


@contextlib.contextmanager
def count(device: Iterable[torch.Tensor] = (), staging: Iterable[torch.Tensor] = (),
          kv: Iterable[torch.Tensor] = ()) -> Iterator[Counts]:
    """Count what runs inside the block.

    `device`: on the CPU, the tensors that stand for device memory (weights, pools); anything
    computed from them is device memory too. `staging`: host buffers the device copies to and from
    asynchronously (pinned on CUDA). `kv`: the KV pool whose attention reads `kv_bytes` counts
    (default: every attention's).
    """
    counts = Counts()
    memory = _Memory(device, staging, kv)
    dispatch = _Dispatch(counts, memory)
    with _Function(dispatch, counts, memory), dispatch:
        yield counts
