"""The live contract: frames, the contract's values, the clock, pacing; and, in submodules, the
engine side (`channel`, `jitter`, `line`, `pulse`, `drive`, `runner`).

Shared by every engine (sim, PersonaPlex) and the GPT-Live front end; see docs/live.md. The package
re-exports only the pure values, so the gateway and the operator, which need the contract
(`contract`, `frames`, `buckets`), never load the engine side: import that from its submodule.
"""

from liveplex.live.buckets import Buckets
from liveplex.live.clock import Clock, Run, Wait, due
from liveplex.live.contract import (
    Audio,
    CheckError,
    Closed,
    CloseReason,
    LiveInfo,
    Output,
    Session,
    SessionDraft,
    Started,
    Text,
)
from liveplex.live.frames import FRAME_BYTES, FRAME_MS, FRAME_SAMPLES, PERIOD_NS, SAMPLE_RATE
from liveplex.live.pacing import Pacing

__all__ = [
    "Clock", "Run", "Wait", "due",
    "Audio", "CheckError", "Closed", "CloseReason", "LiveInfo", "Output", "Session",
    "SessionDraft", "Started", "Text",
    "FRAME_BYTES", "FRAME_MS", "FRAME_SAMPLES", "PERIOD_NS", "SAMPLE_RATE",
    "Pacing", "Buckets",
]
