"""Host staging buffers: the engine's copies to and from the device without extra host syncs.

On CUDA a copy from pageable host memory waits for the stream, and every read of a device value
waits for everything queued before it. So the host side of a tick (spec personaplex §5.5) goes
through buffers allocated once, pinned on CUDA: caller PCM and newcomers' prompt blocks go up as
asynchronous copies, and the tick's outputs come down as one packed copy, after which the host
waits once, the one sync of a tick. On the CPU the buffers are plain tensors and the copies are
memcpys.
"""

from __future__ import annotations

import torch


class Staging:
    """One host buffer of `shape` and `dtype`, for copies between the host and `device`.

    The host must not rewrite the buffer while a copy from it is in flight: `writable` waits for
    the buffer's last upload (normally long done: a tick's download waits for everything before
    it; the wait matters when a tick ends without one, e.g. a prefill into an empty pod).
    """

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
        self.device = device
        self.host = torch.zeros(shape, dtype=dtype, pin_memory=device.type == "cuda")
        self._sent: torch.cuda.Event | None = None

    def writable(self) -> torch.Tensor:
        """The host buffer, once no copy from it is in flight."""
        if self._sent is not None:
            self._sent.synchronize()
            self._sent = None
        return self.host

    def send(self, dst: torch.Tensor) -> None:
        """Copy the buffer's leading rows into `dst` (rows first) asynchronously."""
        dst.copy_(self.host[:dst.shape[0]], non_blocking=True)
        self._record()

    def upload(self, values: torch.Tensor) -> torch.Tensor:
        """A device copy of the host tensor `values` (at most the buffer's size), made through the buffer."""
        flat = self.writable().view(-1)[:values.numel()]
        flat.copy_(values.reshape(-1))
        out = flat.view(values.shape).to(self.device, non_blocking=True, copy=True)
        self._record()
        return out

    def download(self, values: torch.Tensor) -> torch.Tensor:
        """Copy the device tensor `values` (rows first) into the buffer's leading rows and wait for it."""
        dst = self.host[:values.shape[0]]
        dst.copy_(values, non_blocking=True)
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
        return dst

    def _record(self) -> None:
        if self.device.type == "cuda":
            self._sent = torch.cuda.Event()
            self._sent.record(torch.cuda.current_stream(self.device))
