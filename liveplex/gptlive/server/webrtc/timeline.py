"""Where each of the caller's packets sits on its timeline, and what fills the gap before it.

Pure: RTP sequence numbers say whether packets were lost, RTP timestamps (48 kHz ticks) how long
the gap is. `Timeline.place` answers, packet by packet:

| the packet | before it |
|---|---|
| the first; its timestamp back, or over `MAX_FILL_S` on (a sender that started over) | nothing |
| 1 to `RESTART_PACKETS` behind the next one expected (reordered, duplicated) | dropped |
| where the last one ended | nothing |
| after lost packets (a sequence gap), a gap up to `MAX_CONCEAL_S` | Opus's concealment |
| after lost packets, a longer gap (up to `MAX_FILL_S`) | silence |
| after none lost (a sender pausing in silence: Opus DTX), a gap up to `MAX_FILL_S` | silence |

Opus's concealment (`Fill.conceal`) is libopus's PLC, the last lost frame recovered from this
packet's in-band FEC when it carries one.

Concealment is bounded: libopus extrapolates the last pitch for 40 ms, then turns to noise at the
decaying band energies; past `MAX_CONCEAL_S` what it plays is no longer the caller, and a gap that
long is an outage, heard as the silence it was (as before Opus concealed anything), with no
decoder calls spent on it.
"""

from __future__ import annotations

from dataclasses import dataclass

TICKS_PER_S = 48_000
"""Opus's RTP clock (RFC 7587)."""
MAX_CONCEAL_S = 0.12
"""A loss this long at most is concealed by Opus (6 packets of 20 ms); see the module docstring."""
MAX_FILL_S = 1.0
"""A gap this long at most is filled; a longer one, or one backwards, is a sender that started over."""
RESTART_PACKETS = 100
"""A packet this far behind the next expected one is a sender that started over (aiortc's
`MAX_MISORDER`), not a late packet."""
CONCEAL_STEP = TICKS_PER_S * 25 // 10_000
"""Concealment covers whole 2.5 ms steps (libopus's unit); the rest of a gap is silence."""
_SEQ = 1 << 16
_TS = 1 << 32


@dataclass(frozen=True, slots=True)
class Fill:
    """What goes before a packet, in ticks: `conceal` by Opus, then `silence`."""

    conceal: int = 0
    silence: int = 0


NOTHING = Fill()


class Timeline:
    """The caller's packets in arrival order -> what fills the gap before each (module docstring)."""

    def __init__(self) -> None:
        self._next_seq: int | None = None
        self._next_ts = 0
        """Where the next packet should start (the last one's timestamp plus its ticks)."""

    def place(self, seq: int, ts: int, ticks: int) -> Fill | None:
        """Packet `seq` at RTP time `ts`, `ticks` long: what fills the gap before it, or None when
        it came too late to be played."""
        next_seq = self._next_seq
        if next_seq is not None and 0 < (next_seq - seq) % _SEQ <= RESTART_PACKETS:
            return None
        lost = next_seq is not None and seq != next_seq
        gap = (ts - self._next_ts) % _TS
        self._next_seq = (seq + 1) % _SEQ
        self._next_ts = (ts + ticks) % _TS
        if next_seq is None or gap == 0 or gap > MAX_FILL_S * TICKS_PER_S:  # backwards: near 2**32
            return NOTHING
        if lost and gap <= MAX_CONCEAL_S * TICKS_PER_S:
            conceal = gap - gap % CONCEAL_STEP
            return Fill(conceal, gap - conceal)
        return Fill(silence=gap)
