"""`OrderedWrites`: a pod's Redis writes land in the order they were queued, bounded, never stuck."""

from __future__ import annotations

import asyncio

from liveplex.pod import writes


async def _answer(call):
    """What the heartbeat's `_call` does: the call's answer."""
    return await call


async def _write(log: list[str], name: str, delay_s: float) -> str:
    await asyncio.sleep(delay_s)
    log.append(name)
    return name


async def test_a_slow_write_lands_before_the_fast_one_queued_after_it() -> None:
    log: list[str] = []
    w = writes.OrderedWrites(_answer)
    record = w.send(_write(log, "heartbeat (active 0)", 0.05))
    accept = w.send(_write(log, "accept (active 1)", 0.0))
    assert await accept == "accept (active 1)" and await record == "heartbeat (active 0)"
    assert log == ["heartbeat (active 0)", "accept (active 1)"]
    await w.close()


async def test_a_write_that_raises_answers_none_and_the_next_still_lands() -> None:
    async def broken() -> None:
        raise RuntimeError("a bug")

    log: list[str] = []
    w = writes.OrderedWrites(_answer)
    first = w.send(broken())
    second = w.send(_write(log, "next", 0.0))
    assert await first is None and await second == "next"
    await w.close()


async def test_past_the_bound_a_write_is_dropped_answered_none_and_never_left_unawaited() -> None:
    log: list[str] = []
    w = writes.OrderedWrites(_answer, max_queued=2)
    queued = [w.send(_write(log, str(i), 0.01)) for i in range(2)]
    refused = _write(log, "dropped", 0.0)
    dropped = w.send(refused)
    assert refused.cr_frame is None  # closed, so never "coroutine ... was never awaited"
    assert dropped.done() and dropped.result() is None and w.dropped == 1
    assert [await q for q in queued] == ["0", "1"]
    await w.close()
    assert log == ["0", "1"]


async def test_close_lets_every_queued_write_land_in_order() -> None:
    log: list[str] = []
    w = writes.OrderedWrites(_answer)
    for i, delay in enumerate((0.03, 0.0, 0.01)):
        w.send(_write(log, str(i), delay))
    await w.close()
    assert log == ["0", "1", "2"]
    await w.close()  # twice is fine
