"""The simulated listener: a playout buffer that counts how long it ran dry (live-contract §13.3).

Time is integer nanoseconds and durations are whole samples, so the accounting is exact for any
chunking: the player keeps its "runs dry at" instant scaled by the sample rate
(`ns * rate`), which makes `samples * 1e9 / rate` an integer. Splitting a delta into pieces that
arrive at the same instant therefore changes nothing, bit for bit (§14.27).
"""

from __future__ import annotations

_NS_PER_S = 1_000_000_000


class Player:
    """Plays each delta as soon as it has arrived and the previous audio has finished."""

    __slots__ = ("_dry_at_scaled", "_rate", "_stall_scaled")

    def __init__(self, rate: int) -> None:
        """`rate` is the audio's sample rate in Hz; durations passed to `arrive` are samples."""
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self._rate = rate
        self._dry_at_scaled: int | None = None
        self._stall_scaled = 0

    def arrive(self, at_ns: int, samples: int) -> None:
        """Queue `samples` of audio that became playable at `at_ns`.

        The first audio starts playback without a stall; later audio that arrives after the
        player ran dry adds the gap to the stall.
        """
        at_scaled = at_ns * self._rate
        dry_at = self._dry_at_scaled
        if dry_at is None:
            start = at_scaled
        elif at_scaled > dry_at:
            self._stall_scaled += at_scaled - dry_at
            start = at_scaled
        else:
            start = dry_at
        self._dry_at_scaled = start + samples * _NS_PER_S

    def restart(self) -> None:
        """The stream starts over (a paused session resumed): the next audio starts playback
        without a stall, as the first did."""
        self._dry_at_scaled = None

    @property
    def stall_ns(self) -> float:
        """Total time the player was dry between its first audio and its last, in ns."""
        return self._stall_scaled / self._rate

    @property
    def stall_scaled(self) -> int:
        """The exact stall in ns × rate; what property tests compare."""
        return self._stall_scaled
