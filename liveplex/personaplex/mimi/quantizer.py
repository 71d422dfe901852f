"""Mimi's split residual vector quantizer: 1 semantic codebook, then acoustic ones, 2048 entries each.

Each half projects the 512-d latent to the codebook width with its own 1x1 conv. Encoding picks,
codebook by codebook, the nearest centroid (L2) of the residual; decoding sums the centroids and
projects back, and the two halves are added (spec §1.4). A centroid is
`embedding_sum / max(cluster_usage, 1e-5)`: the buffers the checkpoint stores are kept under their
file names, and the centroids are derived from them whenever a state dict is loaded.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from liveplex.personaplex.mimi import config as mimi_config

_USAGE_EPSILON = 1e-5


class Codebook(nn.Module):
    """`_codebook`: the EMA buffers of one codebook, as stored."""

    def __init__(self, bins: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("_initialized", torch.ones(1))
        self.register_buffer("cluster_usage", torch.ones(bins))
        self.register_buffer("embedding_sum", torch.zeros(bins, dim))

    def centroids(self) -> torch.Tensor:
        """[bins, dim] centroids."""
        usage: torch.Tensor = self.cluster_usage  # type: ignore[assignment]
        return self.embedding_sum / usage.clamp(min=_USAGE_EPSILON)[:, None]  # type: ignore[operator]


class _Level(nn.Module):
    def __init__(self, bins: int, dim: int) -> None:
        super().__init__()
        self._codebook = Codebook(bins, dim)


class _Levels(nn.Module):
    def __init__(self, count: int, bins: int, dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_Level(bins, dim) for _ in range(count)])


class ResidualQuantizer(nn.Module):
    """One half (`rvq_first` or `rvq_rest`): projections and its used codebooks."""

    def __init__(self, cfg: mimi_config.MimiConfig, count: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(cfg.dimension, cfg.codebook_dim, 1, bias=False)
        self.output_proj = nn.Conv1d(cfg.codebook_dim, cfg.dimension, 1, bias=False)
        self.vq = _Levels(count, cfg.bins, cfg.codebook_dim)
        self.register_buffer("_centroids", torch.zeros(count, cfg.bins, cfg.codebook_dim), persistent=False)
        self.register_buffer("_squares", torch.zeros(count, cfg.bins), persistent=False)

    def refresh(self) -> None:
        """Recompute the centroids and their squared norms from the stored buffers (after loading)."""
        centroids: torch.Tensor = self._centroids  # type: ignore[assignment]
        centroids.copy_(torch.stack([level._codebook.centroids() for level in self.vq.layers]))
        self._squares.copy_(centroids.pow(2).sum(-1))  # type: ignore[operator]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent x [B, D, T] -> codes [B, count, T] (int64).

        The nearest centroid minimises `|c|^2 - 2 r.c` (the residual's own norm is the same for
        every centroid): one GEMM per codebook instead of `cdist`'s several kernels.
        """
        B, _, T = x.shape
        residual = self.input_proj(x).transpose(1, 2).reshape(B * T, -1)
        codes = []
        for centroids, squares in zip(self._centroids, self._squares, strict=True):  # type: ignore[call-overload]
            index = torch.addmm(squares, residual, centroids.t(), alpha=-2).argmin(dim=-1)
            residual = residual - F.embedding(index, centroids)
            codes.append(index.view(B, T))
        return torch.stack(codes, dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, count, T] -> latent [B, D, T]: the codebooks' centroids summed in order (one
        lookup in the stacked table, then one sum, which accumulates in codebook order)."""
        centroids: torch.Tensor = self._centroids  # type: ignore[assignment]
        count, bins, _ = centroids.shape
        offsets = torch.arange(0, count * bins, bins, device=codes.device)[:, None]
        quantized = F.embedding(codes + offsets, centroids.view(count * bins, -1)).sum(1)
        return self.output_proj(quantized.transpose(1, 2))


class SplitQuantizer(nn.Module):
    """`quantizer`: `rvq_first` (the semantic codebook) and `rvq_rest` (the acoustic ones used)."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.rvq_first = ResidualQuantizer(cfg, 1)
        self.rvq_rest = ResidualQuantizer(cfg, cfg.codebooks - 1)

    def refresh(self) -> None:
        """Recompute both halves' centroids from the stored buffers."""
        self.rvq_first.refresh()
        self.rvq_rest.refresh()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent [B, D, T] -> codes [B, codebooks, T]."""
        return torch.cat([self.rvq_first.encode(x), self.rvq_rest.encode(x)], dim=1)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, codebooks, T] -> latent [B, D, T]."""
        return self.rvq_first.decode(codes[:, :1]) + self.rvq_rest.decode(codes[:, 1:])
