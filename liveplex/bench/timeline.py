"""One session's output timeline as the caller sees it: lateness, playback and transcript order.

The primary GPT-Live socket carries no timestamps, so the timeline comes from the audio itself
(live-contract §13.2): the n-th delta *is* frame n, and `s` samples received before a delta put
its slot at `t0 + s / rate`, where `t0` is the first delta's arrival. Everything is integer ns
and samples; arrival times are passed in, so this module reads no clock.
"""

from __future__ import annotations

import array

from liveplex.bench import player as player_mod

_NS_PER_S = 1_000_000_000


class TimelineError(Exception):
    """The server's output contradicts the session timeline; the session fails with this text."""


class Timeline:
    """Accounts each output delta of one session: its lateness, the player, the transcript."""

    def __init__(self, rate: int, sample_bytes: int, playout_ns: int) -> None:
        """`rate` Hz and `sample_bytes` per sample describe the session's output format;
        `playout_ns` is the player's start-up buffer (120 ms by default)."""
        self.rate = rate
        self.sample_bytes = sample_bytes
        self.playout_ns = playout_ns
        self.player = player_mod.Player(rate)
        self.lateness_us = array.array("q")
        """Per frame: how late it arrived against its slot, in µs (0 when early or on time)."""
        self.frames = 0
        self.samples = 0
        self.transcript: list[str] = []
        self._t0_ns: int | None = None
        self._t0_samples = 0
        """Samples received before `_t0_ns`'s delta: slots count from there."""
        self._last_arrival_ns: int | None = None
        self._last_text_start_ms = -1

    def audio(self, arrival_ns: int, nbytes: int) -> None:
        """Account one `session.output_audio.delta` of `nbytes` decoded bytes arriving at
        `arrival_ns`. Raises `TimelineError` on a partial sample or a clock going backwards."""
        if nbytes <= 0 or nbytes % self.sample_bytes:
            raise TimelineError(
                f"audio delta {self.frames} has {nbytes} bytes, not a whole number of "
                f"{self.sample_bytes}-byte samples"
            )
        last = self._last_arrival_ns
        if last is not None and arrival_ns < last:
            raise TimelineError(
                f"audio delta {self.frames} arrived at {arrival_ns} ns, before the previous "
                f"delta at {last} ns: the timeline went backwards"
            )
        self._last_arrival_ns = arrival_ns
        if self._t0_ns is None:
            self._t0_ns, self._t0_samples = arrival_ns, self.samples
        t0 = self._t0_ns
        # Slot of this delta: t0 + samples / rate; scaled by rate to stay an integer.
        late_scaled = (arrival_ns - t0) * self.rate - (self.samples - self._t0_samples) * _NS_PER_S
        self.lateness_us.append(max(0, late_scaled) // (self.rate * 1000))
        samples = nbytes // self.sample_bytes
        self.player.arrive(max(arrival_ns, t0 + self.playout_ns), samples)
        self.samples += samples
        self.frames += 1

    def resume(self) -> None:
        """The session comes back from a pause (`session.resumed`): its audio starts over, on a
        new clock and with the player's start-up buffer again, so the pause is neither lateness
        nor a stall (the paused time carried no audio by design, docs/pause.md)."""
        self._t0_ns = None
        self.player.restart()

    def text(self, start_ms: int, delta: str) -> None:
        """Account one `session.output_transcript.delta`: it must follow the audio of its frame
        and never go back in time (gpt-live §6.4). Raises `TimelineError` otherwise."""
        if start_ms < self._last_text_start_ms:
            raise TimelineError(
                f"transcript delta at start_ms {start_ms} came after one at "
                f"{self._last_text_start_ms}: the transcript went backwards"
            )
        if start_ms * self.rate >= self.samples * 1000:
            raise TimelineError(
                f"transcript delta at start_ms {start_ms} arrived before its audio "
                f"(audio received up to {self.audio_ms:.1f} ms)"
            )
        self._last_text_start_ms = start_ms
        self.transcript.append(delta)

    @property
    def audio_ms(self) -> float:
        """Milliseconds of audio received so far."""
        return self.samples * 1000 / self.rate

    @property
    def underrun_ms(self) -> float:
        """Total time the simulated player was dry, in ms."""
        return self.player.stall_ns / 1e6
