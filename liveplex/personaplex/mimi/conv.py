"""Causal streaming convolutions with the checkpoint's module nesting (`.conv.conv.weight`).

A streaming conv keeps `kernel - stride` input samples of left context per row, as the head of
the window it convolves: each chunk is written into the window after the context (by the ELU
before the conv itself, when there is one), so no concatenation copies it (issue 14). A streaming
transposed conv keeps `kernel - stride` output samples of overlap (without bias) per row. Feeding
a signal in stride-multiple chunks gives the same output as one causal pass over the whole signal
(spec §1.4). The numerics mirror upstream's `StreamingConv1d` / `StreamingConvTranspose1d`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class _Holder(nn.Module):
    """One level of nesting, so parameter names match the checkpoint (`conv.conv.weight`)."""

    def __init__(self, name: str, module: nn.Module) -> None:
        super().__init__()
        self.add_module(name, module)


class CausalConv(nn.Module):
    """Conv1d with causal left context; weights at `conv.conv.{weight,bias}`."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
        *, bias: bool = True, replicate: bool = False,
    ) -> None:
        super().__init__()
        self.conv = _Holder("conv", nn.Conv1d(in_channels, out_channels, kernel_size, stride, bias=bias))
        self.replicate = replicate
        """Left-pad a fresh stream with its first sample (the downsample) instead of zeros."""

    @property
    def _conv(self) -> nn.Conv1d:
        return self.conv.conv  # type: ignore[return-value]

    @property
    def stride(self) -> int:
        return self._conv.stride[0]

    @property
    def context(self) -> int:
        """Left-context samples kept per channel: kernel - stride."""
        return self._conv.kernel_size[0] - self._conv.stride[0]

    def state_shape(self, chunk: int) -> tuple[int, int]:
        """Per-row state for chunks of `chunk` samples: its window, [in_channels, kernel - stride +
        chunk]; the context is its head, the rest is where each chunk is written."""
        return (self._conv.in_channels, self.context + chunk)

    def step(self, x: torch.Tensor, window: torch.Tensor | None, started: torch.Tensor | None = None, *,
             elu: bool = False) -> torch.Tensor:
        """One chunk: x [B, C_in, T] with T a multiple of the stride -> [B, C_out, T / stride], of
        `elu(x)` with `elu` (the ELU writes its output into the window).

        `window` [B, C_in, kernel - stride + T] is read and updated in place (None when the conv
        keeps no context). With `replicate`, `started` [B] bool says which rows have seen input;
        fresh rows pad with their first sample. The caller updates `started` (it may be shared by
        several convs).
        """
        conv = self._conv
        if window is None:
            return conv(F.elu(x) if elu else x)
        context = self.context
        chunk = window[..., context:]
        if elu:
            torch.ops.aten.elu.out(x, out=chunk)
        else:
            chunk.copy_(x)
        if self.replicate:
            assert started is not None
            torch.where(started.view(-1, 1, 1), window[..., :context], chunk[..., :1], out=window[..., :context])
        y = conv(window)
        carried = window[..., chunk.shape[-1]:]  # the next chunk's context; a short chunk's overlaps it
        window[..., :context].copy_(carried if chunk.shape[-1] >= context else carried.clone())
        return y


class CausalConvTranspose(nn.Module):
    """ConvTranspose1d trimmed on the right; weights at `convtr.convtr.{weight,bias}`."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
        *, bias: bool = True, groups: int = 1,
    ) -> None:
        super().__init__()
        self.convtr = _Holder(
            "convtr",
            nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride, groups=groups, bias=bias),
        )

    @property
    def _convtr(self) -> nn.ConvTranspose1d:
        return self.convtr.convtr  # type: ignore[return-value]

    @property
    def stride(self) -> int:
        return self._convtr.stride[0]

    def state_shape(self) -> tuple[int, int]:
        """Per-row state: [out_channels, kernel - stride] of overlap."""
        conv = self._convtr
        return (conv.out_channels, conv.kernel_size[0] - conv.stride[0])

    def step(self, x: torch.Tensor, overlap: torch.Tensor) -> torch.Tensor:
        """One chunk: x [B, C_in, T] -> [B, C_out, T * stride]; `overlap` is updated in place.

        The output is a view of the conv's: its head gets the carried overlap added in place, then
        its tail (past T * stride, apart from the head: kernel <= 2 * stride) is carried, less the bias.
        """
        conv = self._convtr
        y = conv(x)
        tail = overlap.shape[-1]
        end = y.shape[-1] - tail
        assert end >= tail, "the head and the carried tail overlap"
        y[..., :tail].add_(overlap)
        carried = y[..., end:]
        if conv.bias is not None:
            torch.sub(carried, conv.bias[:, None], out=overlap)
        else:
            overlap.copy_(carried)
        return y[..., :end]


class Downsample(nn.Module):
    """25 Hz -> 12.5 Hz: learnt conv, kernel 4, stride 2, no bias, replicate padding.

    Weight at `conv.conv.conv.weight` ([D, D, 4]).
    """

    def __init__(self, dimension: int, stride: int) -> None:
        super().__init__()
        self.conv = CausalConv(dimension, dimension, 2 * stride, stride, bias=False, replicate=True)

    def step(self, x: torch.Tensor, window: torch.Tensor, started: torch.Tensor) -> torch.Tensor:
        """x [B, D, T] -> [B, D, T / stride]; sets `started` for every row."""
        y = self.conv.step(x, window, started)
        started.fill_(True)
        return y


class Upsample(nn.Module):
    """12.5 Hz -> 25 Hz: depthwise transposed conv, kernel 4, stride 2, no bias.

    Weight at `convtr.convtr.convtr.weight` ([D, 1, 4]). Depthwise reproduces upstream's
    `upsample_channel_wise_bug`, which the released weights were trained with.
    """

    def __init__(self, dimension: int, stride: int) -> None:
        super().__init__()
        self.convtr = CausalConvTranspose(dimension, dimension, 2 * stride, stride, bias=False, groups=dimension)

    def step(self, x: torch.Tensor, overlap: torch.Tensor) -> torch.Tensor:
        """x [B, D, T] -> [B, D, T * stride]."""
        return self.convtr.step(x, overlap)
