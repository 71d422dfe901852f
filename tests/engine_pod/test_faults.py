"""Faults (D9): an exception inside the model mid-tick ends every session and the engine stops.

The engine runs on its real thread under `drive`; the fault is raised by a PyTorch forward hook on
the temporal transformer's output norm, so it comes from inside the model's forward, as an OOM or
CUDA error would.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from liveplex.live import channel, contract, runner
from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(120)


class ModelFault(RuntimeError):
    """What the armed hook raises."""


async def _frames(opened: channel.Opened, n: int) -> None:
    seen = 0
    while seen < n:
        got = await opened.output.next()
        assert got, "the session ended early"
        seen += sum(isinstance(o, contract.Audio) for o in got)


async def _rest(opened: channel.Opened) -> list[contract.Output]:
    out: list[contract.Output] = []
    while got := await opened.output.next():
        out += got
    return out


async def test_an_exception_inside_the_model_ends_every_session_and_the_engine_turns_not_ready(tiny_dir):
    m = harness.load(tiny_dir, context=64)
    armed = threading.Event()

    def fail(module, args):
        if armed.is_set():
            raise ModelFault("injected inside the temporal transformer")

    hook = m.lm.temporal.out_norm.register_forward_pre_hook(fail)
    try:
        eng, handle, _ = harness.build(m, max_sessions=3)
        thread = runner.EngineThread(handle.info, lambda _: eng)
        front = thread.start(asyncio.get_running_loop())
        assert await asyncio.to_thread(thread.wait_built, 30) and thread.ready
        calls = [front.start(contract.Session("NATF2", harness.SHORT_ROLE)) for _ in range(2)]
        assert all(isinstance(c, channel.Opened) for c in calls)
        for c in calls:
            c.audio.send(b"".join(harness.caller_audio(1, 50)))
        await asyncio.gather(*(_frames(c, 3) for c in calls))
        armed.set()
        ends = await asyncio.wait_for(asyncio.gather(*(_rest(c) for c in calls)), 30)
        for out in ends:
            assert isinstance(out[-1], contract.Closed) and out[-1].reason is contract.CloseReason.ABORTED
            assert sum(isinstance(o, contract.Closed) for o in out) == 1
        await asyncio.to_thread(thread.stop, 10)
        assert not thread.ready and isinstance(thread.failed, ModelFault)
        assert front.start(contract.Session("NATF2", harness.SHORT_ROLE)) is channel.Rejected.STOPPED
    finally:
        hook.remove()
