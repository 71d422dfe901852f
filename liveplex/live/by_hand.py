"""A channel for an engine stepped by hand, off any event loop: tests and benches that call
`take` and `tick` themselves and drain the receivers between ticks.

Its hand-off makes each output visible to its receiver as soon as the engine writes it, and has
nothing to wake; the served channel (`channel.live_channel`) releases outputs only at a flush, on
the loop. The choice is made once, here, so the per-frame drain path has no mode.
"""

from __future__ import annotations

from liveplex.live import channel, contract
from liveplex.live.outputs import Handoff, _OutputPipe
from liveplex.live.submissions import DEFAULT_QUEUE


class Immediate(Handoff):
    """Every output visible at once; a flush has nothing to do."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]  # never woken: nothing runs on a loop

    def mark(self, pipe: _OutputPipe) -> None:
        """Called at every send (a pipe is never left marked) and when the sink is dropped."""
        pipe.visible = pipe.written
        pipe.gone_visible = pipe.sink_gone

    def flush(self, wait_ns: int = 0, spread_ns: int = 0) -> None:
        return None


def live_channel(info: contract.LiveInfo, queue: int = DEFAULT_QUEUE) -> tuple[channel.LiveHandle, channel.LiveInbox]:
    """A handle and an inbox whose outputs are visible at once (see the module docstring)."""
    return channel.over(info, Immediate(), queue)
