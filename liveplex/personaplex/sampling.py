"""Token draws: greedy argmax, or temperature + top-k via an exponential race on counter noise.

Decision D8 (spec personaplex §5.9): the uniform noise for token i of a draw is a pure function of
(session seed, column, stream, i). There is no generator state, so a session's draws never depend
on its batch neighbours, its slot, the bucket or the schedule, forced draws consume nothing, and
the computation is CUDA-graph safe. The hash is a 32-bit avalanche mix done with int64 tensor ops;
every multiplier is below 2^31, so no product overflows int64, and CPU and GPU agree bit for bit.
"""

from __future__ import annotations

import dataclasses

import torch

_MASK32 = 0xFFFFFFFF
# Odd multipliers below 2^31 (a 32-bit value times one stays below 2^63).
_M1 = 0x7FEB352D
_M2 = 0x2C1B3C6D
# Distinct constants per folded field, so (a, b) and (b, a) hash apart.
_SALT_SEED_LO, _SALT_SEED_HI, _SALT_COLUMN, _SALT_STREAM = 0x243F6A88, 0x085A308D, 0x13198A2E, 0x03707344


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit avalanche (xorshift-multiply) on int64 holding values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = (x * _M1) & _MASK32
    x = x ^ (x >> 15)
    x = (x * _M2) & _MASK32
    return x ^ (x >> 16)


def _stream_hash(seed: torch.Tensor, column: torch.Tensor, streams: torch.Tensor) -> torch.Tensor:
    """The hash of (seed, column, stream) per row and stream: [B] x [B] x [n] -> [B, n]."""
    h = _mix((seed & _MASK32) ^ _SALT_SEED_LO)
    h = _mix(h ^ ((seed >> 32) & _MASK32) ^ _SALT_SEED_HI)
    h = _mix(h ^ (column & _MASK32) ^ _SALT_COLUMN)
    return _mix(h[:, None] ^ (streams ^ _SALT_STREAM))


def uniforms(seed: torch.Tensor, column: torch.Tensor, streams: range, card: int) -> torch.Tensor:
    """Noise U in (0, 1) of every token id 0..card-1 of draws `streams` per row.

    seed, column: [B] int64. Returns [B, len(streams), card] fp32, `U = (24 hash bits + 0.5) / 2^24`:
    exact in fp32, never 0 or 1.
    """
    ids = torch.arange(card, device=seed.device)
    h = _stream_hash(seed, column, torch.arange(streams.start, streams.stop, device=seed.device))
    bits = _mix(h[..., None] ^ ids) >> 8
    return (bits.float() + 0.5) / float(1 << 24)


def noise(seed: torch.Tensor, column: torch.Tensor, streams: range, card: int) -> torch.Tensor:
    """The race noise `-log(-log U)` of every token id of several draws: [B, len(streams), card] fp32.

    A tick computes it once for all its draws (the hash of seed and column is shared, and each
    draw then only gathers its candidates' values) instead of hashing per draw.
    """
    return -torch.log(-torch.log(uniforms(seed, column, streams, card)))


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
         race: torch.Tensor | None) -> torch.Tensor:
    """One token per row: [B, V] logits -> [B] int64.

    Greedy: argmax, ties to the lowest id. Otherwise keep the top k of `logits / temperature` and
    take `argmax(z - log(-log U))`, which is a draw from softmax over the kept tokens; `race` [B, V]
    is the draw's `noise`.
    """
    if greedy:
        return torch.argmax(logits, dim=-1)
    assert race is not None, "a sampled draw needs its noise"
    z = logits.float() / temperature
    top = torch.topk(z, min(top_k, z.shape[-1]), dim=-1)
    scores = top.values + race.gather(-1, top.indices)
    return top.indices.gather(-1, torch.argmax(scores, dim=-1, keepdim=True))[:, 0]
