"""Mimi's architecture as numbers: the real codec and the tiny test codec (spec §1.4, §6.2).

The reference hard-codes these (upstream `loaders._mimi_config`); so do we. Only widths, depths and
the codebook count change between configs: ratios, kernels, the 250-step transformer window and
the 2048-entry codebooks stay real, so a tiny codec still turns 1920 samples into 8 codes.
"""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True, slots=True)
class MimiConfig:
    """Architecture of Mimi: SEANet, the two transformers, resampling and the split RVQ."""

    filters: int = 64
    """SEANet base width; channels double at each of the 4 encoder stages (64 -> 1024)."""
    dimension: int = 512
    """Latent width between SEANet, the transformers, the resampling convs and the quantizer."""
    ratios: tuple[int, ...] = (8, 6, 5, 4)
    """Decoder strides; the encoder applies them reversed. Product x 2 = 1920 samples a frame."""
    kernel_size: int = 7
    """First encoder conv and first decoder conv."""
    last_kernel_size: int = 3
    """Last encoder conv and last decoder conv."""
    residual_kernel_size: int = 3
    """First conv of each residual block (the second is 1x1)."""
    compress: int = 2
    """Channel reduction inside residual blocks."""
    num_layers: int = 8
    """Layers of each Mimi transformer."""
    num_heads: int = 8
    """Heads of each Mimi transformer."""
    dim_feedforward: int = 2048
    """GELU FFN width of each Mimi transformer."""
    context: int = 250
    """Transformer window in 25 Hz steps, the query included (10 s); also the KV ring length."""
    max_period: float = 10000.0
    """RoPE period of the transformers."""
    codebook_dim: int = 256
    """Width of each codebook entry (the quantizer's inner dimension)."""
    bins: int = 2048
    """Entries per codebook: the audio card."""
    stored_codebooks: int = 32
    """Codebooks in the checkpoint (1 semantic + 31 acoustic); only `codebooks` are used."""
    codebooks: int = 8
    """Codebooks used: 1 semantic, then acoustic; 8 codes per frame."""
    sample_rate: int = 24000
    """Audio sample rate in Hz."""
    frame_rate: float = 12.5
    """Codes per second per codebook."""

    @property
    def hop(self) -> int:
        """SEANet stride in samples: one 25 Hz latent step (960)."""
        return math.prod(self.ratios)

    @property
    def downsample_stride(self) -> int:
        """Stride of the learnt resampling conv between 25 Hz and 12.5 Hz (2)."""
        stride = self.sample_rate / self.hop / self.frame_rate
        assert stride == int(stride), "the encoder rate must be an integer multiple of the frame rate"
        return int(stride)

    @property
    def frame_samples(self) -> int:
        """Samples per frame (1920 = 80 ms at 24 kHz)."""
        return self.hop * self.downsample_stride


def mimi() -> MimiConfig:
    """The real Mimi (spec §1.4): 96 M values in the file, 8 of its 32 codebooks used."""
    return MimiConfig()


def tiny() -> MimiConfig:
    """Spec §6.2's tiny Mimi: 4 filters, width 32, 2 layers, 16 stored codebooks; window still 250."""
    return MimiConfig(
        filters=4, dimension=32, num_layers=2, num_heads=4, dim_feedforward=64,
        codebook_dim=16, stored_codebooks=16,
    )


CONFIGS = {"mimi": mimi, "tiny": tiny}
"""Named configs for CLIs."""
