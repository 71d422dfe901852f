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
        await asyncio.wait_for(asyncio.gather(*(_frames(c, 3) for c in calls)), 30)
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


def _pair_run(m, nan_at_tick: int | None) -> tuple[harness.Call, harness.Call]:
    """Sessions a (slot 0) and b (slot 1) for 20 ticks; optionally a NaN in row 0 at one tick."""
    armed = threading.Event()

    def poison(module, args, out):
        if armed.is_set() and out.shape[0] == 2:  # the live step of both rows, not a prefill
            armed.clear()
            out = out.clone()
            out[0] = float("nan")
            return out
        return None

    hook = m.lm.temporal.out_norm.register_forward_hook(poison)
    try:
        pod = harness.Pod(*harness.build(m, max_sessions=2))
        a = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 20))
        b = pod.start("NATM1", "Hello world.", harness.caller_audio(2, 20))
        for t in range(20):
            if t == nan_at_tick:
                armed.set()
            pod.tick()
        return a, b
    finally:
        hook.remove()


def test_a_non_finite_row_ends_only_its_session_and_the_moved_neighbour_is_untouched(tiny_dir):
    m = harness.load(tiny_dir, context=64)
    a, b = _pair_run(m, nan_at_tick=6)
    clean_a, clean_b = _pair_run(m, nan_at_tick=None)
    assert a.closed == contract.Closed(contract.CloseReason.ABORTED, 6, a.closed.underruns, a.closed.dropped)
    assert a.pcm == clean_a.pcm[:6]
    assert b.closed is None  # it moved from slot 1 to slot 0 and now runs alone (batch 2 -> 1)
    harness.assert_same_tokens_close_audio(b, clean_b)


def test_a_newcomer_whose_prefill_raises_is_refused_without_started_and_running_sessions_abort(tiny_dir):
    """live-contract §10: setup that fails before `Started` is `Closed.refused(ABORTED)`."""
    m = harness.load(tiny_dir, context=64)
    armed = threading.Event()

    def fail(module, args):
        if armed.is_set() and args[0].shape[0] > 3:  # the prefill's prompt rows, not a 1..3-row live step
            raise ModelFault("injected inside the prefill")

    hook = m.lm.temporal.out_norm.register_forward_pre_hook(fail)
    try:
        pod = harness.Pod(*harness.build(m, max_sessions=3))
        running = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 20))
        for _ in range(3):
            pod.tick()
        armed.set()
        newcomer = pod.start("NATM1", "Hello world.", harness.caller_audio(2, 20))
        with pytest.raises(ModelFault):
            pod.tick()
        pod.engine.abort()  # what `drive` does after a tick raised
    finally:
        hook.remove()
    for call in pod.calls:
        call.collect()
    assert newcomer.outputs == [contract.Closed.refused(contract.CloseReason.ABORTED)]
    assert newcomer.opened.output.ended
    assert running.outputs[0] == contract.Started() and len(running.pcm) == 3
    assert running.closed is not None and running.closed.reason is contract.CloseReason.ABORTED
    assert running.closed.frames == 3 and pod.engine.sessions() == 0
