"""The live contract: frames, jitter buffer, clock, channel, `Line`, `Pulse` and the drive loop.

Shared by every engine (sim, PersonaPlex) and the GPT-Live front end; see docs/live.md.
"""

from liveplex.live.buckets import Buckets
from liveplex.live.channel import (
    CLOSED,
    TIMEOUT,
    AudioReceiver,
    AudioSender,
    LiveHandle,
    LiveInbox,
    LiveSubmission,
    Opened,
    OutputReceiver,
    OutputSink,
    Rejected,
    live_channel,
)
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
from liveplex.live.drive import EngineError, Ticker, drive
from liveplex.live.frames import FRAME_BYTES, FRAME_MS, FRAME_SAMPLES, PERIOD_NS, SAMPLE_RATE
from liveplex.live.jitter import Jitter, s16le
from liveplex.live.line import Line
from liveplex.live.pacing import Pacing
from liveplex.live.pulse import Pulse

__all__ = [
    "CLOSED", "TIMEOUT", "AudioReceiver", "AudioSender", "LiveHandle", "LiveInbox",
    "LiveSubmission", "Opened", "OutputReceiver", "OutputSink", "Rejected", "live_channel",
    "Clock", "Run", "Wait", "due",
    "Audio", "CheckError", "Closed", "CloseReason", "LiveInfo", "Output", "Session",
    "SessionDraft", "Started", "Text",
    "EngineError", "Ticker", "drive",
    "FRAME_BYTES", "FRAME_MS", "FRAME_SAMPLES", "PERIOD_NS", "SAMPLE_RATE",
    "Jitter", "s16le", "Line", "Pacing", "Buckets", "Pulse",
]
