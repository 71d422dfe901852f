"""Caller talk profiles: how much of each minute a bench caller speaks (issue 43's idle pause).

`continuous` (the default) loops the input as it is. `speak5of60` is a mostly quiet caller (issue
43's benchmark): the first 5 s of the input, then 55 s of silence, looped, so a pod with `--idle-pause-s 3` pauses it
about 3 s after each burst and the caller's next speech wakes it. The speech must be real speech,
because Silero VAD wakes the session and a loud tone is not speech to it: use the shipped
recording (the default input) or another recording.

To see what the model heard around each wake, every 80 ms frame of such a caller carries a
*quiet stamp*: its index within the cycle, written as ±2 (about -80 dBFS) over its first 16
samples. A full-scale stamp like `roundtrip`'s would lift every silent frame over the detector's
-50 dBFS gate and cost a model call per frame; a quiet one leaves silence silent, and real callers'
silence is never digital zero anyway. The sim echoes `audio/pcm` 24 kHz bytes untouched, so each
output delta's first 16 samples tell which caller frame the model heard (`Wakes`). Pure: times
are passed in.
"""

from __future__ import annotations

import array
import base64
import binascii
import dataclasses

import numpy as np

from liveplex.live import frames


@dataclasses.dataclass(frozen=True, slots=True)
class Talk:
    """One talk profile: `speak_s` seconds of the input at the start of every `every_s`."""

    speak_s: float
    every_s: float

    @property
    def cycle_frames(self) -> int:
        """80 ms frames per cycle (750 for a minute)."""
        return round(self.every_s * 1000) // frames.FRAME_MS


PROFILES: dict[str, Talk | None] = {"continuous": None, "speak5of60": Talk(5.0, 60.0), "speak1of4": Talk(1.0, 4.0)}
"""`--caller`'s choices; None: the input looped as it is. `speak1of4` is the same shape in seconds
(with `--idle-pause-s 1` it pauses and wakes within 6 s): the smoke test's."""

STAMP_SAMPLES = 16
"""Samples per quiet stamp: 10 index bits, then `_CHECK`'s 6."""
_INDEX_BITS = 10
_CHECK = (1, 0, 1, 1, 0, 1)
"""Fixed bits after the index, so audio that merely happens to be ±2 is not read as a stamp."""
_LEVEL = 2
STAMP_B64_CHARS = -(-STAMP_SAMPLES * 2 // 3) * 4
"""Base64 characters of a delta that hold its stamp (44: 33 bytes, the stamp's 32 first)."""
GATE_DBFS = -50.0
"""A frame of the input louder than this starts its speech (the detector's own gate, `pod.vad`)."""


def shape(samples: np.ndarray, talk: Talk, rate: int) -> np.ndarray:
    """One cycle of `talk` from the int16 `samples` at `rate` Hz (looped if shorter than the
    speech), each 80 ms frame quietly stamped with its index. Needs the 24 kHz frame grid."""
    if rate != frames.SAMPLE_RATE:
        raise ValueError(f"a talk profile needs {frames.SAMPLE_RATE} Hz audio/pcm (its stamps ride on "
                         f"the frame grid and come back byte for byte), got {rate} Hz")
    if talk.cycle_frames >= 1 << _INDEX_BITS:
        raise ValueError(f"a cycle of {talk.cycle_frames} frames does not fit a {_INDEX_BITS}-bit stamp")
    speak = round(talk.speak_s * rate)
    out = np.zeros(talk.cycle_frames * frames.FRAME_SAMPLES, np.int16)
    out[:speak] = np.resize(samples, speak)
    for j in range(talk.cycle_frames):
        at = j * frames.FRAME_SAMPLES
        out[at:at + STAMP_SAMPLES] = _stamp(j)
    return out


def _stamp(index: int) -> np.ndarray:
    bits = [(index >> b) & 1 for b in range(_INDEX_BITS)] + list(_CHECK)
    return np.array([_LEVEL if bit else -_LEVEL for bit in bits], np.int16)


def index(head: str) -> int | None:
    """The cycle index stamped at the start of a delta whose base64 text begins with `head`, or
    None when it carries no quiet stamp (the server's own silence, another caller's audio)."""
    try:
        raw = base64.b64decode(head[:STAMP_B64_CHARS], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < STAMP_SAMPLES * 2:
        return None
    values = np.frombuffer(raw[:STAMP_SAMPLES * 2], "<i2")
    if not np.all(np.abs(values) == _LEVEL):
        return None
    bits = (values > 0).astype(int).tolist()
    if tuple(bits[_INDEX_BITS:]) != _CHECK:
        return None
    return sum(bit << b for b, bit in enumerate(bits[:_INDEX_BITS]))


def onset_frame(cycle: np.ndarray) -> int:
    """The first frame of a cycle louder than the gate: where the caller's speech begins."""
    usable = len(cycle) // frames.FRAME_SAMPLES * frames.FRAME_SAMPLES
    rows = cycle[:usable].astype(np.float64).reshape(-1, frames.FRAME_SAMPLES)
    loud = np.sqrt((rows ** 2).mean(axis=1)) > 32768 * 10 ** (GATE_DBFS / 20)
    return int(np.argmax(loud)) if loud.any() else 0


class Wakes:
    """One caller's wakes as it heard them: for each `session.resumed`, how long after its speech
    onset it came, and how much audio from before it the model heard (the pre-roll).

    The caller frame `k` of its stream is cycle `k // cycle_frames`, frame `k % cycle_frames`. The
    sim's echo after a wake first plays what the session still held when it paused (frames that
    go on from the last one heard), then jumps to the pre-roll: the first frame heard after a
    jump is where the model's audio resumed, and every frame from there that was sent before
    `session.resumed` arrived is pre-roll that reached the model.
    """

    __slots__ = ("_counting", "_cycle", "_last", "_onset", "_onset_k", "_resumed_ns", "_seeking", "onset_echo_ms",
                 "pre_roll_ms", "sent_ns", "wake_ms")

    def __init__(self, talk: Talk, onset: int) -> None:
        self._cycle = talk.cycle_frames
        self._onset = onset
        self.sent_ns = array.array("q")
        """When each caller frame (the chunk completing it) was sent, `perf_counter_ns`."""
        self.wake_ms = array.array("d")
        """Per `session.resumed`: its arrival minus the send of its cycle's speech onset frame."""
        self.pre_roll_ms = array.array("d")
        """Per wake: audio sent before `session.resumed` arrived that the model heard, ms."""
        self.onset_echo_ms = array.array("d")
        """Per wake whose onset frame the model heard: that frame's send to its echo's arrival. Less
        the sim's echo delay (`echo_frames`, 480 ms) it is when the model heard the speech onset."""
        self._onset_k = -1
        self._last = -1
        self._resumed_ns = 0
        self._seeking = False
        """After `session.resumed`, until the jump to the pre-roll is heard."""
        self._counting: int | None = None
        """Pre-roll frames heard so far, while the frames heard were sent before the resume."""

    def sent(self, stream_end: int, now_ns: int) -> None:
        """The caller sent its stream up to byte `stream_end` at `now_ns`."""
        while (len(self.sent_ns) + 1) * frames.FRAME_BYTES <= stream_end:
            self.sent_ns.append(now_ns)

    def resumed(self, at_ns: int) -> None:
        """`session.resumed` arrived at `at_ns`: time it against the onset of the latest speech sent."""
        sent = len(self.sent_ns)
        onset = (sent - 1 - self._onset) // self._cycle * self._cycle + self._onset if sent > self._onset else -1
        if onset >= 0:
            self.wake_ms.append((at_ns - self.sent_ns[onset]) / 1e6)
        self._onset_k = onset
        self._resumed_ns, self._seeking = at_ns, True

    def heard(self, head: str, arrival_ns: int) -> None:
        """An output delta whose base64 text begins with `head` arrived at `arrival_ns`."""
        j = index(head)
        sent = len(self.sent_ns)
        if j is None or sent == 0:
            return
        k = (sent - 1 - j) // self._cycle * self._cycle + j  # the latest frame sent with that index
        if k < 0:
            return
        if k == self._onset_k:
            self.onset_echo_ms.append((arrival_ns - self.sent_ns[k]) / 1e6)
            self._onset_k = -1
        if self._seeking and k > self._last + 1:
            self._seeking, self._counting = False, 0
        if self._counting is not None and k > self._last:
            if self.sent_ns[k] < self._resumed_ns:
                self._counting += 1
            else:
                self.pre_roll_ms.append(float(self._counting * frames.FRAME_MS))
                self._counting = None
        self._last = max(self._last, k)
