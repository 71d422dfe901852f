"""Token draws: greedy argmax, or temperature + top-k via an exponential race on counter noise.

Decision D8 (spec personaplex §5.9): the uniform noise for token i of a draw is a pure function of
(session seed, column, stream, i); the seed's part of the hash (`key`) is computed once per
session. There is no generator state, so a session's draws never depend on its batch neighbours,
its slot, the bucket or the schedule, forced draws consume nothing, and the computation is
CUDA-graph safe. The hash is a 32-bit avalanche mix done with int64 tensor ops;
every multiplier is below 2^31, so no product overflows int64, and CPU and GPU agree bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import TypeVar

import torch

_Int = TypeVar("_Int", torch.Tensor, int)

# The hash's constants (public: `kernels.noise` computes the same hash in one kernel).
MASK32 = 0xFFFFFFFF
# Odd multipliers below 2^31 (a 32-bit value times one stays below 2^63).
M1 = 0x7FEB352D
M2 = 0x2C1B3C6D
# Distinct constants per folded field, so (a, b) and (b, a) hash apart.
_SALT_SEED_LO, _SALT_SEED_HI, SALT_COLUMN, SALT_STREAM = 0x243F6A88, 0x085A308D, 0x13198A2E, 0x03707344


def _mix(x: _Int) -> _Int:
    """A 32-bit avalanche (xorshift-multiply) on int64 holding values in [0, 2^32) (tensors or ints)."""
    x = x ^ (x >> 16)
    x = (x * M1) & MASK32
    x = x ^ (x >> 15)
    x = (x * M2) & MASK32
    return x ^ (x >> 16)


def key(seed: _Int) -> _Int:
    """A session's sampling key: its 64-bit seed folded to 32 bits (int64 tensors or ints, equal
    results). Computed once per session, on the host; the token state holds it."""
    h = _mix((seed & MASK32) ^ _SALT_SEED_LO)
    return _mix(h ^ ((seed >> 32) & MASK32) ^ _SALT_SEED_HI)


def _stream_hash(key_: torch.Tensor, column: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """The hash of (key, column, stream) per row and stream: [B] x [B] x [n] -> [B, n]."""
    h = _mix(key_ ^ (column & MASK32) ^ SALT_COLUMN)
    return _mix(h[:, None] ^ (streams ^ SALT_STREAM))


def _uniforms(hashed: torch.Tensor) -> torch.Tensor:
    """U in (0, 1) of tokens from their stream hash xor their id (any shape) -> fp32,
    `U = (24 bits of their mix + 0.5) / 2^24`: exact in fp32, never 0 or 1."""
    bits = _mix(hashed) >> 8
    return torch.add(bits, 0.5) * 2.0 ** -24  # the add computes in fp32 (type promotion): exact


def uniforms(key_: torch.Tensor, column: torch.Tensor, streams: range, card: int) -> torch.Tensor:
    """Noise U of every token id 0..card-1 of draws `streams`: keys [B] x columns [B] ->
    [B, len(streams), card] (spec §5.9: what the tests pin)."""
    h = _stream_hash(key_, column, torch.arange(streams.start, streams.stop, device=key_.device))
    return _uniforms(h[..., None] ^ torch.arange(card, device=key_.device))


Race = Callable[[torch.Tensor], torch.Tensor]
"""A draw's race noise of candidate token ids, negated: `log(-log U)`, [B, k] int64 -> [B, k] fp32
(the draw subtracts it, so the negation costs no kernel)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lanes:
    """Every token id of every draw of a tick laid end to end, one lane each, built once per engine:
    hashing the noise of all of them is then one pass (`lane_noise`), whatever the cards."""

    cards: tuple[int, ...]
    stream: torch.Tensor
    """[sum(cards)] int64: each lane's draw."""
    ids: torch.Tensor
    """[sum(cards)] int64: each lane's token id."""

    @classmethod
    def of(cls, cards: tuple[int, ...], device: torch.device | str) -> Lanes:
        stream = torch.cat([torch.full((c,), s, dtype=torch.long, device=device) for s, c in enumerate(cards)])
        ids = torch.cat([torch.arange(c, device=device) for c in cards])
        return cls(cards, stream, ids)

    def split(self, table: torch.Tensor) -> list[torch.Tensor]:
        """Each draw's columns of a [B, sum(cards)] table (`lane_noise`): [B, cards[s]] views."""
        assert table.shape[-1] == sum(self.cards), "a table of other draws"
        return [table[:, end - card:end] for card, end in zip(self.cards, itertools.accumulate(self.cards))]


def lane_noise(key_: torch.Tensor, column: torch.Tensor, stream: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The race noise (`Race`'s values) of lanes `stream`, `ids` [L] (`Lanes`) for rows with keys and
    columns [B]: [B, L] fp32. Eager, about forty kernels; `kernels.noise` computes it in one."""
    return _noise(_uniforms(_stream_hash(key_, column, stream) ^ ids))


def races(key_: torch.Tensor, column: torch.Tensor, cards: tuple[int, ...]) -> list[Race]:
    """The `Race` of each draw 0..len(cards)-1 of one column (draw s over `cards[s]` token ids),
    hashing only the candidates a draw asks for: far less arithmetic than every lane
    (`lane_noise`), for the CPU. key_, column: [B] int64 (`key` of the seeds)."""
    h = _stream_hash(key_, column, torch.arange(len(cards), device=key_.device))
    return [functools.partial(_race_of, h[:, s]) for s in range(len(cards))]


def _noise(u: torch.Tensor) -> torch.Tensor:
    return torch.log(-torch.log(u))


def _race_of(h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return _noise(_uniforms(h[:, None] ^ ids))


@dataclasses.dataclass(frozen=True, slots=True)
class Sampling:
    """How draws are made; one per engine (the client never sets these, spec §1.6)."""

    greedy: bool = False
    """Argmax instead of sampling (tests)."""
    text_temperature: float = 0.7
    text_top_k: int = 25
    audio_temperature: float = 0.8
    audio_top_k: int = 250


def draw(logits: torch.Tensor, *, greedy: bool, temperature: float, top_k: int,
         race: Race | None) -> torch.Tensor:
    """One token per row: [B, V] logits -> [B] int64.

    Greedy: argmax, ties to the lowest id. Otherwise keep the top k logits z (`candidates`) and
    take `argmax(z / temperature - log(-log U))`, a draw from the softmax of `z / temperature`
    over the kept tokens (`winner`); `race` is the draw's noise (`races`).
    """
    if greedy:
        return torch.argmax(logits, dim=-1)
    assert race is not None, "a sampled draw needs its noise"
    top = candidates(logits, top_k)
    return winner(top.values, top.indices, race(top.indices), temperature)


def candidates(logits: torch.Tensor, top_k: int) -> torch.return_types.topk:
    """A sampled draw's candidates: the top k of [B, V] logits, in fp32, largest first ([B, k]
    values and ids)."""
    z = logits.float()
    return torch.topk(z, min(top_k, z.shape[-1]), dim=-1)


def winner(values: torch.Tensor, ids: torch.Tensor, noise: torch.Tensor, temperature: float) -> torch.Tensor:
    """The race among candidates: values, ids and their noise `log(-log U)` [B, k] -> [B] int64.

    `argmax(z - temperature log(-log U))`, the same argmax as `z / temperature - log(-log U)`
    with one kernel for the temperature and the noise; ties to the first candidate (the largest
    logit). `kernels.race` does this and the noise's gather in one kernel.
    """
    scores = torch.add(values, noise, alpha=-temperature)
    return ids.gather(-1, torch.argmax(scores, dim=-1, keepdim=True))[:, 0]
