"""The duplex bench: real-time GPT-Live callers, the bare baseline server, and their reports."""

from liveplex.bench.caller import CallResult, CallSettings
from liveplex.bench.level import Level
from liveplex.bench.player import Player
from liveplex.bench.timeline import Timeline, TimelineError

__all__ = ["CallResult", "CallSettings", "Level", "Player", "Timeline", "TimelineError"]
