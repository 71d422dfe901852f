"""SEANet encoder and decoder of Mimi: causal conv stacks between 24 kHz audio and the latent.

Module indices inside `model` follow the checkpoint (`encoder.model.{0,3,6,9,12,14}` convs,
`encoder.model.{1,4,7,10}` residual blocks, ELUs at the other indices; spec §2.3), so parameter
names equal the file's keys. Streaming state is one tensor per stateful conv, in execution order.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from torch.nn import functional as F

from liveplex.personaplex.mimi import config as mimi_config
from liveplex.personaplex.mimi import conv


class ResidualBlock(nn.Module):
    """ELU, conv (kernel 3, channels halved), ELU, 1x1 conv back; identity skip."""

    def __init__(self, dim: int, kernel_size: int, compress: int) -> None:
        super().__init__()
        hidden = dim // compress
        self.block = nn.ModuleList([
            nn.ELU(), conv.CausalConv(dim, hidden, kernel_size), nn.ELU(), conv.CausalConv(hidden, dim, 1),
        ])

    def step(self, x: torch.Tensor, states: Iterator[torch.Tensor]) -> torch.Tensor:
        return x + _run(self.block, x, states)


def _run(modules: nn.ModuleList, x: torch.Tensor, states: Iterator[torch.Tensor]) -> torch.Tensor:
    """Apply a stack of ELUs, streaming convs and residual blocks, consuming states in order. An
    ELU before a conv is that conv's (`CausalConv.step(elu=True)`: it writes into the window)."""
    elu = False
    for module in modules:
        if isinstance(module, nn.ELU):
            assert not elu, "two ELUs in a row"
            elu = True
            continue
        if isinstance(module, conv.CausalConv):
            x = module.step(x, next(states) if module.context else None, elu=elu)
        else:
            x = F.elu(x) if elu else x
            if isinstance(module, ResidualBlock):
                x = module.step(x, states)
            else:
                assert isinstance(module, conv.CausalConvTranspose)
                x = module.step(x, next(states))
        elu = False
    return F.elu(x) if elu else x


def _state_shapes(modules: nn.ModuleList, chunk: int) -> tuple[list[tuple[int, int]], int]:
    """Per-row shapes of the stack's states, in execution order, for input chunks of `chunk`
    samples; and the chunk it outputs."""
    found: list[tuple[int, int]] = []
    for module in modules:
        if isinstance(module, ResidualBlock):
            inner, _ = _state_shapes(module.block, chunk)
            found += inner
        elif isinstance(module, conv.CausalConvTranspose):
            found.append(module.state_shape())
            chunk *= module.stride
        elif isinstance(module, conv.CausalConv):
            if module.context:
                found.append(module.state_shape(chunk))
            chunk //= module.stride
    return found, chunk


class _Seanet(nn.Module):
    model: nn.ModuleList

    def init_states(self, batch: int, chunk: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        """Fresh (zero) per-row states of every stateful conv, in execution order, for input
        chunks of `chunk` samples."""
        shapes, _ = _state_shapes(self.model, chunk)
        return tuple(torch.zeros(batch, *shape, device=device) for shape in shapes)

    def step(self, x: torch.Tensor, states: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """One chunk through the stack; `states` (from `init_states`) are updated in place."""
        remaining = iter(states)
        y = _run(self.model, x, remaining)
        assert next(remaining, None) is None, "more conv states than stateful convs"
        return y


class Encoder(_Seanet):
    """Audio [B, 1, T] -> latent [B, dimension, T / 960], strides 4, 5, 6, 8."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        mult = 1
        layers: list[nn.Module] = [conv.CausalConv(1, cfg.filters, cfg.kernel_size)]
        for ratio in reversed(cfg.ratios):
            width = mult * cfg.filters
            layers += [
                ResidualBlock(width, cfg.residual_kernel_size, cfg.compress),
                nn.ELU(),
                conv.CausalConv(width, 2 * width, 2 * ratio, ratio),
            ]
            mult *= 2
        layers += [nn.ELU(), conv.CausalConv(mult * cfg.filters, cfg.dimension, cfg.last_kernel_size)]
        self.model = nn.ModuleList(layers)


class Decoder(_Seanet):
    """Latent [B, dimension, T] -> audio [B, 1, T * 960], strides 8, 6, 5, 4; no output activation."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        mult = 2 ** len(cfg.ratios)
        layers: list[nn.Module] = [conv.CausalConv(cfg.dimension, mult * cfg.filters, cfg.kernel_size)]
        for ratio in cfg.ratios:
            width = mult * cfg.filters
            layers += [
                nn.ELU(),
                conv.CausalConvTranspose(width, width // 2, 2 * ratio, ratio),
                ResidualBlock(width // 2, cfg.residual_kernel_size, cfg.compress),
            ]
            mult //= 2
        layers += [nn.ELU(), conv.CausalConv(cfg.filters, 1, cfg.last_kernel_size)]
        self.model = nn.ModuleList(layers)
