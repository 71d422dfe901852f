"""The PersonaPlex-7B language-model architecture as constants, plus small configs for tests.

The reference hard-codes these numbers and never reads `config.json` (spec personaplex §2.1), so we
do the same. `tiny()` and `small()` shrink widths and depths but keep every code path: 16 audio
streams, 16 depformer steps stored, audio card 2048 (so SILENCE and SINE ids exist), text card
32000, the real delays and special ids (spec §6.2).
"""

from __future__ import annotations

import dataclasses

# Stream layout (spec §1.5): 0 text, 1..8 agent cb0..7, 9..16 user cb0..7.
NUM_STREAMS = 17
DELAYS: tuple[int, ...] = (0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1)
TEXT_INIT = 32000
AUDIO_INIT = 2048
TEXT_PAD = 3
# Mimi codes of digital silence (agent) and of a quiet 440 Hz tone (user), spec §1.5.
SILENCE: tuple[int, ...] = (948, 243, 1178, 546, 1736, 1030, 1978, 2008)
SINE: tuple[int, ...] = (430, 1268, 381, 1611, 1095, 1495, 56, 472)
# Agent codebooks the live engine draws; the depformer's user steps are never run live (D1).
AGENT_CODEBOOKS = 8
RMS_EPS = 1e-8


def _gated_hidden(dim: int, hidden_scale: float) -> int:
    """Hidden width of a gated SiLU FFN, computed exactly as upstream's `ActivationGating` does."""
    dim_feedforward = int(hidden_scale * dim)
    if dim_feedforward == 4 * dim:
        return (21 * dim) // 8
    return (2 * dim_feedforward) // 3


@dataclasses.dataclass(frozen=True, slots=True)
class LMConfig:
    """Architecture of the temporal transformer and the depformer (spec §1.2, §1.3)."""

    dim: int
    """Temporal width (4096)."""
    num_heads: int
    """Temporal attention heads; head width is dim // num_heads (128)."""
    num_layers: int
    """Temporal layers (32)."""
    hidden_scale: float
    """FFN scale as upstream states it (4.125); the gated hidden width derives from it."""
    context: int
    """Window in positions, the query included (3000 = 240 s); also the KV ring length."""
    dep_dim: int
    """Depformer width (1024)."""
    dep_num_heads: int
    """Depformer heads (16 of 64)."""
    dep_num_layers: int
    """Depformer layers (6)."""
    dep_steps: int = 16
    """Depformer steps stored in the checkpoint: 8 agent then 8 user codebooks."""
    n_q: int = 16
    """Audio streams fed to the temporal transformer (8 agent + 8 user)."""
    card: int = 2048
    """Audio codebook size; embeddings have card + 1 rows (the INIT row)."""
    text_card: int = 32000
    """Text vocabulary of the head; the embedding has text_card + 1 rows (the INIT row)."""
    max_period: float = 10000.0
    """RoPE period."""

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    @property
    def hidden(self) -> int:
        """Gated FFN hidden width of the temporal transformer (11264)."""
        return _gated_hidden(self.dim, self.hidden_scale)

    @property
    def dep_hidden(self) -> int:
        """Gated FFN hidden width of the depformer (2816)."""
        return _gated_hidden(self.dep_dim, self.hidden_scale)

    def with_context(self, context: int) -> LMConfig:
        """The same architecture with another window (tests use small windows to wrap the ring)."""
        return dataclasses.replace(self, context=context)


def personaplex_7b() -> LMConfig:
    """The real PersonaPlex-7B numbers (spec §1.2, §1.3)."""
    return LMConfig(
        dim=4096, num_heads=32, num_layers=32, hidden_scale=4.125, context=3000,
        dep_dim=1024, dep_num_heads=16, dep_num_layers=6,
    )


def tiny() -> LMConfig:
    """Spec §6.2's tiny LM: dim 64, 2 layers, context 40 so that tests run past the window."""
    return LMConfig(
        dim=64, num_heads=4, num_layers=2, hidden_scale=4.125, context=40,
        dep_dim=32, dep_num_heads=4, dep_num_layers=2,
    )


def small() -> LMConfig:
    """A CPU-benchmark size: big enough that weight reads, not Python, dominate a tick."""
    return LMConfig(
        dim=512, num_heads=8, num_layers=6, hidden_scale=4.125, context=375,
        dep_dim=256, dep_num_heads=8, dep_num_layers=3,
    )


CONFIGS = {"personaplex-7b": personaplex_7b, "tiny": tiny, "small": small}
"""Named configs for CLIs (`--config tiny|small|personaplex-7b`)."""
