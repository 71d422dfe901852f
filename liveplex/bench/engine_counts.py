"""`liveplex bench engine --count`: the PersonaPlex tick's kernels, host syncs and KV reads, exactly.

Issue 14. Three measurements, each with `liveplex.bench.counts`:

- **the device program** (`engine_pod.program.Program.run(B)`: Mimi encode, live step, draws,
  Mimi decode, packing) and **one newcomer's prefill** (`prefill.admit`, the default prompt: a
  50-frame voice and 26 role tokens), at any config's real shapes on the meta device (no memory,
  no weights) or on the CPU: aten ops, host syncs inside them (there must be none), and the KV
  bytes attention reads;
- **the engine's host side**: a real `PersonaPlexEngine` on the tiny checkpoint on the CPU (the
  host code does not depend on shapes), serving sessions through the live channel: host syncs
  per served tick, with and without a newcomer being prefilled.

KV bytes: on the CPU they are what the kernels are given (each row's `seqused_k` keys under
`flash`, the whole span under `masked`); on the meta device the lengths have no values, so a
level reports what `flash` is told to read for its scenario's positions, `valid_kv_bytes`
(`tests/bench/test_engine_counts.py` checks on the CPU that the kernels read exactly that).
"""

from __future__ import annotations

import dataclasses
import pathlib
import tempfile
from typing import TypedDict

import torch

from liveplex.bench import counts
from liveplex.engine_pod import memory, program, settings, staging
from liveplex.engine_pod import model as model_mod
from liveplex.flags import default_of
from liveplex.live import frames
from liveplex.personaplex import checkpoint, config, depformer, mimi, prefill, prompt, ring, sampling, temporal
from liveplex.pod import pause, wake

VOICE_FRAMES = 50
ROLE_TOKENS = 26
"""The default prompt: a 50-frame voice, the default instructions' 26 tokens."""
YOUNG = 100
"""A young session's position (8 s)."""


class TickCounts(TypedDict):
    """One counted tick (a JSON row of `bench engine --count`)."""

    batch: int
    ops: int
    by_op: dict[str, int]
    syncs: list[str]
    kv_bytes: int
    kv_measured: bool
    valid_kv_bytes: int


class LevelCounts(TickCounts):
    """A tick of `batch` sessions padded to its `bucket`, every session at `position`."""

    bucket: int
    position: int


class NewcomerCounts(TypedDict):
    rows: int
    ops: int
    syncs: list[str]
    kv_bytes: int
    kv_measured: bool
    valid_kv_bytes: int


class ParkCounts(TypedDict):
    """What the idle pause's park and wake move per session, and what a GPU then admits (issue 43),
    for one GPU and ring dtype (a row of `bench engine --count`'s pause table)."""

    gpu: str
    ring: str
    park_bytes: int
    """One slot's state rows, every pool (KV ring, Mimi, token state): what a park copies to the
    host and a wake copies back."""
    held_bytes: int
    """The pinned host memory a park holds: each of its tensors a power-of-two block of torch's
    pinned host allocator (`program.pinned_block_bytes`); what the host budget counts."""
    copy_ms: float
    """`park_bytes` over the host link, one way."""
    wakes_per_tick: int
    """Whole wakes the link copies in one 80 ms tick."""
    slots: int
    """Sessions the device admits without the pause: the engine's own cap on CUDA with its
    defaults (`engine.cuda_cap`: the spare slot and every group's graphs counted)."""
    paused: int
    """Paused sessions the host budget holds, at `held_bytes` each."""
    held: int
    """Sessions the pod admits with the pause, each paused once admitted (`most_held`)."""
    active: int
    """Of `held`, the most in the batch at once once `wake_reserve` paused ones hold their slots."""


FREE_AFTER_LOAD_GIB = {"H100 80GB": 63.7, "H200": 123.7}
"""Device memory free once the 7B's weights, Mimi and voices are resident (docs/engine_pod.md,
"Memory per session": visible 79.1 and 139 GiB less ≈15.4 GiB)."""
PCIE5_BYTES_S = 50e9
"""A pinned host copy over PCIe 5 x16, each way: 64 GB/s raw per direction, ≈50 GB/s sustained."""


class EngineSyncs(TypedDict):
    syncs_per_tick: int
    syncs_in_an_admitting_tick: int
    what_syncs: list[str]


@dataclasses.dataclass(frozen=True, slots=True)
class Model:
    """An LM and a codec on one device, the weights' values irrelevant, and the KV rings' dtype."""

    lm: checkpoint.LM
    codec: mimi.Mimi
    kv_dtype: torch.dtype | None = None
    """None: the weights' own; `kv8.FP8`: the 8-bit ring."""

    @property
    def cfg(self) -> config.LMConfig:
        return self.lm.temporal.cfg


def build(name: str, device: str, dtype: torch.dtype, kv_dtype: torch.dtype | None = None) -> Model:
    """`name`'s shapes with 8 resident depformer steps and its Mimi (the real one for
    `personaplex-7b`), on `device`: uninitialised on the meta device, seeded random elsewhere."""
    cfg = config.CONFIGS[name]()
    codec_cfg = mimi.mimi_config() if name == "personaplex-7b" else mimi.tiny_config()
    if device == "meta":
        with torch.device("meta"):
            lm = checkpoint.LM(temporal.Temporal(cfg).eval(), depformer.Depformer(cfg, 8).eval(), 8, ("F32",))
            codec = mimi.Mimi(codec_cfg).eval()
    else:
        lm, codec = checkpoint.random_lm(cfg, seed=0, device=device), mimi.random_mimi(codec_cfg, 0, device)
    lm.temporal.to(dtype)
    lm.depformer.to(dtype)
    return Model(lm, codec, kv_dtype)


def _kv_bytes_per_key(cfg: config.LMConfig, dtype: torch.dtype) -> int:
    """K and V of one position, all layers."""
    return 2 * cfg.num_layers * cfg.dim * torch.empty((), dtype=dtype).element_size()


def valid_kv_bytes(cfg: config.LMConfig, dtype: torch.dtype, positions: list[int]) -> int:
    """What attention reads when each row at `positions` reads only its valid keys (`ring.valid_length`;
    a prefill's run reads its ring's prefix up to its last position)."""
    return sum(min(p + 1, cfg.context) for p in positions) * _kv_bytes_per_key(cfg, dtype)


@torch.no_grad()
def tick(model: Model, positions: list[int], backend: ring.Backend) -> TickCounts:
    """One served tick of rows at `positions` (`program.Program.run`), counted."""
    batch = len(positions)
    pools = program.Pools(model.lm, model.codec, batch, model.kv_dtype)
    if pools.pcm_in.device.type != "meta":
        pools.tokens.pos.copy_(torch.tensor(positions))
    prog = program.Program(model.lm, model.codec, pools, prompt.Schedule.UPSTREAM, sampling.Sampling(), False,
                           backend)
    span = min(model.cfg.context, max(positions) + 1)
    with counts.count(device=_device_tensors(model, pools), kv=pools.kv.tensors()) as c:
        prog.run(batch, span)
    return TickCounts(batch=batch, ops=c.total_ops, by_op=dict(c.ops.most_common()), syncs=c.syncs,
                      kv_bytes=c.kv_bytes, kv_measured=not c.kv_unknown,
                      valid_kv_bytes=valid_kv_bytes(model.cfg, pools.kv.kv.dtype, positions))


@torch.no_grad()
def newcomer(model: Model, backend: ring.Backend) -> NewcomerCounts:
    """One newcomer's prefill with the default prompt (`prefill.admit`, its block through a
    staging buffer as the engine does), counted."""
    cfg = model.cfg
    device = model.lm.temporal.text_linear.weight.device
    pools = program.Pools(model.lm, model.codec, 1, model.kv_dtype)
    N = min(VOICE_FRAMES, cfg.context // 4)
    role = min(ROLE_TOKENS, cfg.context - N - 15)
    silence = prompt.silence_column()
    layout = prompt.layout(torch.zeros(N, cfg.dim), silence, silence, [5] * role, prompt.Schedule.UPSTREAM)
    shape = (cfg.num_layers, N, 2, cfg.num_heads, cfg.head_dim)
    dtype = pools.kv.kv.dtype
    prefix = prefill.VoicePrefix(torch.zeros(shape, dtype=dtype, device=device))
    stage = staging.Staging((prefill.block_numel(layout.columns.shape[0]),), torch.long, device)
    with counts.count(device=_device_tensors(model, pools) + [prefix.kv], staging=[stage.host],
                      kv=pools.kv.tensors()) as c:
        prefill.admit(model.lm.temporal, model.lm.depformer, pools.kv, pools.tokens,
                      [prefill.Newcomer(0, layout, prefix, seed=1)], prompt.Schedule.UPSTREAM, sampling.Sampling(),
                      backend, stage.upload)
    rows = layout.columns.shape[0]
    return NewcomerCounts(rows=rows, ops=c.total_ops, syncs=c.syncs, kv_bytes=c.kv_bytes,
                          kv_measured=not c.kv_unknown, valid_kv_bytes=valid_kv_bytes(cfg, dtype, [N + rows - 1]))


def kv_bytes_per_session(cfg: config.LMConfig) -> dict[str, int]:
    """One session's KV ring at `cfg`'s shapes, per ring dtype (`engine_pod.memory.kv_bytes`): what
    admission divides free memory by."""
    return {name: memory.kv_bytes(cfg.num_layers, cfg.context, cfg.dim, dtype.itemsize)
            for name, dtype in model_mod.KV_DTYPES.items()}


def park_bytes(model: Model, kv_dtype: torch.dtype) -> int:
    """One slot's state at `model`'s shapes with a `kv_dtype` ring (`program.Pools`, one slot, its
    caller-frame input left out: a park copies state, not the next tick's input)."""
    pools = program.Pools(model.lm, model.codec, 1, kv_dtype)
    return pools.slot_bytes - pools.pcm_in[0].numel() * pools.pcm_in.element_size()


def park_held_bytes(model: Model, kv_dtype: torch.dtype) -> int:
    """The pinned host memory a park from CUDA holds at `model`'s shapes (`HostRows.held_bytes`:
    each tensor of `Pools.park` rounded up to a power of two by torch's pinned allocator)."""
    return program.held_bytes(program.Pools(model.lm, model.codec, 1, kv_dtype).park_sizes(), pinned=True)


def parks(model: Model, host_budget: int, link_bytes_s: float = PCIE5_BYTES_S,
          reserve_gib: float = default_of(settings.EngineSettings, "memory_reserve_gib"),
          wake_reserve: int = default_of(pause.PauseSettings, "wake_reserve")) -> list[ParkCounts]:
    """Per GPU and ring dtype of the 7B: the bytes a park and a wake copy, the copy's time over the
    host link, the pinned host memory a park holds, and the sessions the device admits without the
    pause (the engine's cap with its defaults on CUDA: `--tick-groups 0`, `--park-copies auto`,
    so one spare slot, and CUDA graphs) and with `host_budget` bytes of pinned host memory for
    paused ones (the pod's admission, `wake.free_slots`)."""
    from liveplex.engine_pod import engine

    rows = []
    for gpu, free_gib in FREE_AFTER_LOAD_GIB.items():
        for name, dtype in model_mod.KV_DTYPES.items():
            if dtype.itemsize > 2:
                continue
            per, pinned = park_bytes(model, dtype), park_held_bytes(model, dtype)
            on_cuda = settings.EngineSettings(pathlib.Path(), device="cuda", dtype="bf16", kv_dtype=name,
                                              memory_reserve_gib=reserve_gib)
            slots = engine.cuda_cap(on_cuda, int(free_gib * memory.GIB),
                                    engine.slot_bytes_of(model.cfg, model.codec, name).total)
            paused = host_budget // pinned
            held = most_held(slots, paused, wake_reserve)
            copy_s = per / link_bytes_s
            rows.append(ParkCounts(gpu=gpu, ring=name, park_bytes=per, held_bytes=pinned,
                                   copy_ms=round(copy_s * 1e3, 2), wakes_per_tick=int(frames.PERIOD_NS / 1e9 / copy_s),
                                   slots=slots, paused=paused, held=held, active=slots - wake_reserve))
    return rows


def most_held(slots: int, max_paused: int, wake_reserve: int) -> int:
    """The most sessions a pod admits (`wake.free_slots`) when each pauses once admitted, while the
    host budget holds it: admit while it admits, pause what may pause, until neither changes."""
    active = paused = 0
    while True:
        admitted = wake.free_slots(slots, active, paused, wake_reserve, max_paused)
        pausing = min(active + admitted, max_paused - paused)
        if admitted == pausing == 0:
            return active + paused
        active, paused = active + admitted - pausing, paused + pausing


def weight_bytes(model: Model) -> int:
    """The weights one step reads (temporal, depformer, Mimi): what each extra tick group reads again."""
    return sum(t.numel() * t.element_size() for m in (model.lm.temporal, model.lm.depformer, model.codec)
               for t in m.state_dict().values())


def _device_tensors(model: Model, pools: program.Pools) -> list[torch.Tensor]:
    params = [t for m in (model.lm.temporal, model.lm.depformer, model.codec) for t in m.state_dict().values()]
    return params + pools.tensors()


def levels(model: Model, batches: list[int], buckets: list[int], backend: ring.Backend) -> list[LevelCounts]:
    """Per batch size, one tick of young sessions and one at full context, each in its bucket
    (padding rows at position 0)."""
    rows = []
    for batch in batches:
        bucket = min(b for b in buckets if b >= batch)
        for position in (YOUNG, model.cfg.context):
            counted = tick(model, [position] * batch + [0] * (bucket - batch), backend)
            counted["batch"] = batch  # the sessions, not the bucket's rows
            rows.append(LevelCounts(**counted, bucket=bucket, position=position))
    return rows


@torch.no_grad()
def engine_syncs(ticks: int = 4) -> EngineSyncs:
    """Host syncs per tick of a real engine on the tiny checkpoint (CPU, `masked`: the host side is
    the same for both backends): two sessions running, then a third admitted and prefilled."""
    from liveplex.engine_pod import engine
    from liveplex.engine_pod import model as model_mod
    from liveplex.live import by_hand, channel, contract
    from liveplex.personaplex import tiny_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp) / "tiny"
        tiny_checkpoint.make_tiny(directory)
        loaded = model_mod.load(directory, device="cpu", dtype="fp32", context_frames=3000, max_voice_frames=250)
    s = settings.EngineSettings(model_dir=directory, max_sessions=4, greedy=False, seed=0)
    info = engine.live_info(loaded, s, engine.session_cap(loaded, s))
    handle, inbox = by_hand.live_channel(info)
    eng = engine.PersonaPlexEngine(loaded, s, info, inbox.pulse)
    silence = bytes(frames.FRAME_BYTES)
    opened: list[channel.Opened] = []
    found: dict[str, list[list[str]]] = {"running": [], "admitting": []}

    def start() -> None:
        got = handle.start(contract.Session("NATF2", "Hi."))
        assert isinstance(got, channel.Opened)
        opened.append(got)

    def step(kind: str | None) -> None:
        for o in opened:
            o.audio.send(silence)
        for sub in inbox.drain_nowait():
            assert isinstance(sub, channel.LiveSubmission)  # only starts were queued
            eng.take(sub)
        with counts.count(device=eng.device_tensors(), staging=eng.host_buffers) as c:
            eng.tick(0)
        if kind:
            found[kind].append(c.syncs)
        for o in opened:
            o.output.drain()

    start()
    start()
    for _ in range(ticks):  # the prefill tick, then the prebuffer ticks, then served ticks
        step(None)
    for _ in range(ticks):
        step("running")
    start()
    step("admitting")
    for o in opened:
        o.audio.close()
    step(None)
    return EngineSyncs(syncs_per_tick=max(len(x) for x in found["running"]),
                       syncs_in_an_admitting_tick=max(len(x) for x in found["admitting"]),
                       what_syncs=sorted({s for x in found["running"] + found["admitting"] for s in x}))
