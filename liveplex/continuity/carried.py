"""A line's part of a handover blob: its buffered caller audio and counters, written and read back.

`live.line.Line.hand_over` gives plain values (`Carried`) and `Line.restore` takes them: the live
contract knows nothing of blobs. Both engines' blobs hold this part the same way (header scalars
`odd`, `playing`, `underruns`, `dropped`; array `jitter`), so it is written and checked once, here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from liveplex.continuity import errors
from liveplex.continuity.blob import Handover
from liveplex.live.jitter import Jitter
from liveplex.live.line import Carried, Line


def part(c: Carried) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The blob's header scalars and arrays for what a line carries (the engine adds its own after them)."""
    scalars = {"odd": c.odd.hex(), "playing": c.playing, "underruns": c.underruns, "dropped": c.dropped}
    return scalars, {"jitter": np.frombuffer(c.pending, np.uint8)}


def restore(h: Handover, jitter: Jitter, max_frames: int) -> None:
    """Load the line's part of handover `h` into `jitter`, checking it and the frame count against
    an engine of `max_frames` frames a session; raises `HandoverError`."""
    try:
        Line.restore(jitter, Carried(h.array("jitter", "|u1", (None,)).tobytes(), bytes.fromhex(h.scalar("odd", str)),
                                     h.scalar("playing", bool), h.scalar("underruns", int), h.scalar("dropped", int)))
    except ValueError as exc:  # a bad hex string, or a buffer past this engine's cap
        raise errors.state(("arrays", "jitter"), str(exc)) from None
    frames_within(h.header.frames, max_frames)


def frames_within(frames: int, max_frames: int) -> None:
    """Raise `HandoverError` unless a session that ran `frames` frames may run another here."""
    if not 0 <= frames < max_frames:
        raise errors.state(("header", "frames"), f"is {frames}, outside 0..{max_frames - 1}")
