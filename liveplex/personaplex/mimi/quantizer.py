"""Mimi's split residual vector quantizer: 1 semantic codebook, then acoustic ones, 2048 entries each.

Each half projects the 512-d latent to the codebook width with its own 1x1 conv. Encoding picks,
codebook by codebook, the nearest centroid (L2) of the residual; decoding sums the centroids and
projects back, and the two halves are added (spec §1.4). A centroid is
`embedding_sum / max(cluster_usage, 1e-5)`: the buffers the checkpoint stores are kept under their
file names, and what is derived from them (the centroids of all codebooks as one table, both
halves' input projections as one) is recomputed whenever a state dict is loaded (`refresh`), so
that a frame's codes take one projection and two kernels per codebook, and its decode five kernels.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from liveplex.personaplex import blocks
from liveplex.personaplex.mimi import config as mimi_config

_USAGE_EPSILON = 1e-5


class Codebook(nn.Module):
    """`_codebook`: the EMA buffers of one codebook, as stored."""

    cluster_usage: torch.Tensor
    embedding_sum: torch.Tensor

    def __init__(self, bins: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("_initialized", torch.ones(1))
        self.register_buffer("cluster_usage", torch.ones(bins))
        self.register_buffer("embedding_sum", torch.zeros(bins, dim))

    def centroids(self) -> torch.Tensor:
        """[bins, dim] centroids."""
        return self.embedding_sum / self.cluster_usage.clamp(min=_USAGE_EPSILON)[:, None]


class _Level(nn.Module):
    def __init__(self, bins: int, dim: int) -> None:
        super().__init__()
        self._codebook = Codebook(bins, dim)


class _Levels(nn.Module):
    def __init__(self, count: int, bins: int, dim: int) -> None:
        super().__init__()
        self.layers = blocks.Stack([_Level(bins, dim) for _ in range(count)])


class ResidualQuantizer(nn.Module):
    """One half (`rvq_first` or `rvq_rest`): projections and its used codebooks, as stored."""

    def __init__(self, cfg: mimi_config.MimiConfig, count: int) -> None:
        super().__init__()
        self.input_proj = nn.Conv1d(cfg.dimension, cfg.codebook_dim, 1, bias=False)
        self.output_proj = nn.Conv1d(cfg.codebook_dim, cfg.dimension, 1, bias=False)
        self.vq = _Levels(count, cfg.bins, cfg.codebook_dim)

    def centroids(self) -> torch.Tensor:
        """[count, bins, dim] centroids of its codebooks."""
        return torch.stack([level._codebook.centroids() for level in self.vq.layers])


class SplitQuantizer(nn.Module):
    """`quantizer`: `rvq_first` (the semantic codebook) and `rvq_rest` (the acoustic ones used)."""

    _centroids: torch.Tensor
    _squares: torch.Tensor
    _offsets: torch.Tensor
    _input_proj: torch.Tensor

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.rvq_first = ResidualQuantizer(cfg, 1)
        self.rvq_rest = ResidualQuantizer(cfg, cfg.codebooks - 1)
        count, bins, dim = cfg.codebooks, cfg.bins, cfg.codebook_dim
        self.register_buffer("_centroids", torch.zeros(count, bins, dim), persistent=False)
        self.register_buffer("_squares", torch.zeros(count, bins), persistent=False)
        self.register_buffer("_offsets", torch.zeros(count, 1, dtype=torch.long), persistent=False)
        """Codebook k's first row in the flattened table: k * bins."""
        self.register_buffer("_input_proj", torch.zeros(2 * dim, cfg.dimension, 1), persistent=False)

    def refresh(self) -> None:
        """Recompute the derived tensors from the stored ones (after loading)."""
        self._centroids.copy_(torch.cat([self.rvq_first.centroids(), self.rvq_rest.centroids()]))
        self._squares.copy_(self._centroids.pow(2).sum(-1))
        count, bins, _ = self._centroids.shape
        self._offsets.copy_(torch.arange(0, count * bins, bins, device=self._offsets.device)[:, None])
        self._input_proj.copy_(torch.cat([self.rvq_first.input_proj.weight, self.rvq_rest.input_proj.weight]))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Latent x [B, D, T] -> codes [B, codebooks, T] (int64).

        The nearest centroid minimises `|c|^2 - 2 r.c` (the residual's own norm is the same for
        every centroid): one GEMM per codebook instead of `cdist`'s several kernels. The semantic
        codebook's residual and the last acoustic one's are never used, so never computed.
        """
        B, _, T = x.shape
        count, _, dim = self._centroids.shape
        residuals = F.conv1d(x, self._input_proj).transpose(1, 2).reshape(B * T, 2, dim)
        codes = []
        residual = residuals[:, 0]  # the semantic codebook's, then (level 1) the first acoustic one's:
        for level, (centroids, squares) in enumerate(zip(self._centroids, self._squares, strict=True)):
            if level == 1:  # each half's own residual
                residual = residuals[:, 1]
            index = torch.addmm(squares, residual, centroids.t(), alpha=-2).argmin(dim=-1)
            if 0 < level < count - 1:
                residual = residual - F.embedding(index, centroids)
            codes.append(index)
        return torch.stack(codes, dim=1).view(B, T, count).transpose(1, 2)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes [B, codebooks, T] -> latent [B, D, T]: each half's centroids summed in codebook
        order (one lookup in the flattened table, then one sum, which accumulates in order), each
        half projected back, and the two added."""
        _, _, dim = self._centroids.shape
        quantized = F.embedding(codes + self._offsets, self._centroids.view(-1, dim))  # [B, codebooks, T, dim]
        semantic, acoustic = quantized[:, 0].transpose(1, 2), quantized[:, 1:].sum(1).transpose(1, 2)
        return self.rvq_first.output_proj(semantic) + self.rvq_rest.output_proj(acoustic)
