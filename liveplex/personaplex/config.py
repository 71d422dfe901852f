"""The language-model architecture: its numbers as one frozen value, the stream layout, named sizes.

A checkpoint's numbers are derived from the checkpoint itself (`architecture`: its `config.json`,
else its tensor shapes); the named configs here are the real PersonaPlex-7B and two small test and
benchmark sizes. `tiny()` and `small()` shrink widths and depths but keep every code path: 16
audio streams, 16 depformer steps stored, audio card 2048 (so SILENCE and SINE ids exist), text
card 32000, the real delays and special ids (spec personaplex §6.2).
"""

from __future__ import annotations

import dataclasses

# Stream layout (spec §1.5): 0 text, 1..8 agent cb0..7, 9..16 user cb0..7.
NUM_STREAMS = 17
DELAYS: tuple[int, ...] = (0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1)
TEXT_PAD = 3
# Mimi codes of digital silence (agent) and of a quiet 440 Hz tone (user), spec §1.5.
SILENCE: tuple[int, ...] = (948, 243, 1178, 546, 1736, 1030, 1978, 2008)
SINE: tuple[int, ...] = (430, 1268, 381, 1611, 1095, 1495, 56, 472)
# Agent codebooks the live engine draws; the depformer's user steps are never run live (D1).
AGENT_CODEBOOKS = 8
RMS_EPS = 1e-8
HIDDEN_SCALE = 4.125
"""The FFN scale of every Kyutai and PersonaPlex model so far (moshi's `hidden_scale`)."""


def gated_hidden(dim: int, dim_feedforward: int) -> int:
    """Hidden width of a gated SiLU FFN from moshi's `dim_feedforward`, as `ActivationGating` computes it."""
    if dim_feedforward == 4 * dim:
        return (21 * dim) // 8
    return (2 * dim_feedforward) // 3


@dataclasses.dataclass(frozen=True, slots=True)
class LMConfig:
    """Architecture of the temporal transformer and the depformer (spec §1.2, §1.3).

    Widths are the ones the tensors have (the gated FFN's hidden width, not moshi's scale), so a
    config derived from a checkpoint's shapes and one read from its `config.json` compare equal.
    """

    dim: int
    """Temporal width (4096)."""
    num_heads: int
    """Temporal attention heads; head width is dim // num_heads (128)."""
    num_layers: int
    """Temporal layers (32)."""
    hidden: int
    """Gated FFN hidden width of the temporal transformer (11264)."""
    context: int
    """Window in positions, the query included (3000 = 240 s); also the KV ring length."""
    dep_dim: int
    """Depformer width (1024)."""
    dep_num_heads: int
    """Depformer heads (16 of 64)."""
    dep_num_layers: int
    """Depformer layers (6)."""
    dep_hidden: int
    """Gated FFN hidden width of the depformer (2816)."""
    dep_steps: int = 16
    """Depformer steps stored in the checkpoint: 16 (PersonaPlex: 8 agent then 8 user codebooks) or
    8 (Moshi: the agent codebooks only)."""
    n_q: int = 16
    """Audio streams fed to the temporal transformer (8 agent + 8 user)."""
    card: int = 2048
    """Audio codebook size; embeddings have card + 1 rows, the last being the INIT token."""
    text_card: int = 32000
    """Text vocabulary of the head; the embedding has text_card + 1 rows, the last being the INIT token."""
    max_period: float = 10000.0
    """RoPE period."""

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    @property
    def init_column(self) -> tuple[int, ...]:
        """The INIT token of every stream: text `text_card` (never drawn: the head has `text_card`
        outputs), audio `card`. What the model reads before a stream has its first token."""
        return (self.text_card,) + (self.card,) * self.n_q

    def with_context(self, context: int) -> LMConfig:
        """The same architecture with another window (tests use small windows to wrap the ring)."""
        return dataclasses.replace(self, context=context)


def _named(dim: int, num_heads: int, num_layers: int, context: int, dep_dim: int, dep_num_heads: int,
           dep_num_layers: int) -> LMConfig:
    return LMConfig(
        dim=dim, num_heads=num_heads, num_layers=num_layers, hidden=gated_hidden(dim, int(HIDDEN_SCALE * dim)),
        context=context, dep_dim=dep_dim, dep_num_heads=dep_num_heads, dep_num_layers=dep_num_layers,
        dep_hidden=gated_hidden(dep_dim, int(HIDDEN_SCALE * dep_dim)))


def personaplex_7b() -> LMConfig:
    """The real PersonaPlex-7B numbers (spec §1.2, §1.3); Moshi 7B is the same with 8 depformer steps."""
    return _named(4096, 32, 32, 3000, 1024, 16, 6)


def tiny() -> LMConfig:
    """Spec §6.2's tiny LM: dim 64, 2 layers, context 40 so that tests run past the window."""
    return _named(64, 4, 2, 40, 32, 4, 2)


def small() -> LMConfig:
    """A CPU-benchmark size: big enough that weight reads, not Python, dominate a tick."""
    return _named(512, 8, 6, 375, 256, 8, 3)


CONFIGS = {"personaplex-7b": personaplex_7b, "tiny": tiny, "small": small}
"""Named configs for CLIs (`--config tiny|small|personaplex-7b`) and for naming a loaded checkpoint."""
