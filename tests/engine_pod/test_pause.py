"""A PersonaPlex session paused (parked: its slot's rows copied to host memory) and woken (those
rows copied back into a free slot on the same engine, `outside_frames` later, no prefill)
continues bit-exact against its twin that never paused, fed the same caller frames (issue 43,
docs/pause.md): the model's positions go on from where they were, so it perceives no gap; its
neighbour ran on meanwhile; and the time out comes off the woken line's `max_frames`. A parked
state's blob (what a move carries) still resumes exactly elsewhere, through the prefill.

Through the spare (`--park-copies spare`, the CUDA default; here its CPU form, the copies
synchronous) the same, and the order at a tick boundary with copies still in flight (`_Slow`: a
GPU's copy stream, played by copies reported done only when the test says): a wake joins at the
first boundary its copy is done, two wakes land one a boundary, a park waits while a copy holds
the spare, a regroup waits for the spare and runs at the boundary the wake lands at."""

from __future__ import annotations

import pytest
import torch

from liveplex.engine_pod import copies, engine, program
from liveplex.live import contract, groups
from liveplex.live.channel import Opened
from liveplex.live.drive import Pending
from tests.engine_pod import harness

TICKS = 20


def _pod(model, kv_dtype: str | None = None, park_copies: str = "inline", **overrides: object) -> harness.Pod:
    settings = {"max_sessions": 3, "buckets": (3,), **overrides}
    return harness.Pod(*harness.build(model, greedy=False, seed=11, prefill_budget_ms=10_000.0, jitter_frames=48,
                                      kv_dtype=kv_dtype, park_copies=park_copies, **settings))


class _Flight(copies.Copy):
    """A copy made at once on the CPU but done only once `land` says (one in flight on a copy stream)."""

    __slots__ = ("landed",)

    def __init__(self) -> None:
        super().__init__()
        self.landed = False

    def done(self) -> bool:
        return self.landed


class _Slow(copies.Copies):
    """The engine's CPU copies, each reported done only when the test lands it."""

    def __init__(self) -> None:
        super().__init__(torch.device("cpu"))
        self.flights: list[_Flight] = []

    def down(self, pools: program.Pools, slot: int) -> tuple[program.HostRows, copies.Copy]:
        return super().down(pools, slot)[0], self._flight()

    def up(self, pools: program.Pools, slot: int, rows: program.HostRows) -> copies.Copy:
        super().up(pools, slot, rows)
        return self._flight()

    def _flight(self) -> _Flight:
        self.flights.append(_Flight())
        return self.flights[-1]

    def land(self) -> None:
        for f in self.flights:
            f.landed = True


def _slow(pod: harness.Pod) -> _Slow:
    slow = _Slow()
    pod.engine._copies = slow
    return slow


@pytest.mark.parametrize("k, paused, moved, kv_dtype, park_copies", [
    (6, 9, False, None, "inline"), (6, 9, True, None, "inline"), (6, 9, False, "fp8", "inline"),
    (6, 9, False, None, "spare"), (6, 9, False, "fp8", "spare")])
def test_a_paused_and_woken_session_continues_exactly(tiny_model, k: int, paused: int, moved: bool,
                                                      kv_dtype: str | None, park_copies: str) -> None:
    """`moved`: woken from the parked state's blob on another engine as a move would, prefilled.
    `kv_dtype` fp8: an e4m3 ring's rows are parked as their bits. `park_copies` spare: parked and
    woken through the spare slot, the copies done at once (the CPU's)."""
    twin, pod = _pod(tiny_model, kv_dtype, park_copies), _pod(tiny_model, kv_dtype, park_copies)
    session = contract.Session("NATF2", harness.SHORT_ROLE)
    for p in (twin, pod):  # the same submission ids, so the same seeds; a neighbour in each batch
        p.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(5, TICKS + paused))
    want = twin.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    quiet = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, TICKS))
    for _ in range(k):
        pod.tick()
    parked = pod.engine.export(quiet.opened.id, park=True)  # the pause
    assert isinstance(parked, engine.Parked)
    assert parked.nbytes >= pod.engine.pools.slot_bytes - pod.engine.pools.pcm_in[0].nbytes
    assert all(not t.is_cuda for s in parked.rows.states() for t in s.tensors())
    quiet.collect()
    assert quiet.closed == contract.Closed(contract.CloseReason.HANDED_OVER, k, 0, 0)
    pod.calls.remove(quiet)
    for _ in range(paused):  # out of the batch: the neighbour runs alone
        pod.tick()
        assert pod.engine.running == 1
    if moved:
        pod = _pod(tiny_model, kv_dtype)  # its neighbour's batch no longer matters: rows are independent
    prefills = pod.handle.pulse.prefill.cumulative()[-1]
    woken = pod.handle.resume(session, parked.blob() if moved else parked, False, paused)  # the wake
    assert isinstance(woken, Opened)
    after = harness.Call(woken, quiet.audio[quiet.fed:])
    pod.calls.append(after)
    for _ in range(TICKS):
        twin.tick()
    pod.tick()
    assert pod.engine.slot_of(woken.id) is not None and pod.engine.waiting == 0  # in the first tick's batch
    assert (pod.handle.pulse.prefill.cumulative()[-1] > prefills) == moved  # parked: no prefill ran
    for _ in range(TICKS - k - 1):
        pod.tick()
    assert after.outputs[0] == contract.Started(k)
    got = quiet.pcm + after.pcm
    assert len(got) == TICKS and got == want.pcm  # bit for bit: CPU, fp32, one thread
    assert quiet.tokens[:k] + after.tokens == want.tokens[:TICKS]


def test_the_time_out_comes_off_the_woken_lines_frames(tiny_model) -> None:
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, max_seconds=1.6))  # 20 frames
    call = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 40))
    for _ in range(5):
        pod.tick()
    parked = pod.engine.export(call.opened.id, park=True)
    assert isinstance(parked, engine.Parked)
    pod.calls.remove(call)
    woken = pod.handle.resume(contract.Session("NATF2", harness.SHORT_ROLE), parked, False, 10)
    assert isinstance(woken, Opened)
    after = harness.Call(woken, call.audio[5:])
    pod.calls.append(after)
    for _ in range(10):
        pod.tick()
    assert after.closed == contract.Closed(contract.CloseReason.EXPIRED, 10, 0, 0)  # 5 + 10 out + 5


def _twins(model, pod: harness.Pod, names: list[str], ticks: int, **overrides: object) -> list[harness.Call]:
    """`pod` with a neighbour and sessions `names` (their audio seeds 1, 2...), and their twins
    in a pod of their own that never pauses, run `ticks` ticks (the twins' whole runs)."""
    twin = _pod(model, **overrides)
    wants = []
    for p in (twin, pod):  # the same submission ids, so the same seeds
        p.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(5, 3 * TICKS))
        calls = [p.start(name, harness.SHORT_ROLE, harness.caller_audio(i + 1, TICKS)) for i, name in enumerate(names)]
        if p is twin:
            wants = calls
    for _ in range(ticks):
        twin.tick()
    return wants


def _park(pod: harness.Pod, call: harness.Call) -> engine.Parked:
    parked = pod.engine.export(call.opened.id, park=True)
    assert isinstance(parked, engine.Parked)
    call.collect()
    pod.calls.remove(call)
    return parked


def _wake(pod: harness.Pod, call: harness.Call, parked: engine.Parked, paused: int) -> harness.Call:
    woken = pod.handle.resume(contract.Session(call.opened.session.voice, harness.SHORT_ROLE), parked, False, paused)
    assert isinstance(woken, Opened)
    after = harness.Call(woken, call.audio[call.fed:])
    pod.calls.append(after)
    return after


def _exact(before: harness.Call, after: harness.Call, want: harness.Call, k: int) -> None:
    assert after.outputs[0] == contract.Started(k)
    assert before.pcm + after.pcm == want.pcm[:len(before.pcm) + len(after.pcm)] and len(after.pcm) >= TICKS - k - 2
    assert before.tokens[:k] + after.tokens == want.tokens[:k + len(after.tokens)]


def test_a_wake_whose_copy_is_in_flight_joins_at_the_boundary_it_is_done(tiny_model) -> None:
    """Through the spare with copies in flight: a park's copy holds the spare (a second park waits a
    tick, `Pending`), a wake's joins at the first boundary after its copy is done, and until then the
    session is counted as the engine's (`sessions`) and an export of it waits (`Pending`)."""
    k = 6
    pod = _pod(tiny_model, park_copies="spare")
    want, other = _twins(tiny_model, pod, ["NATF2", "NATM1"], TICKS + 2, park_copies="spare")
    quiet, neighbour = pod.calls[1], pod.calls[2]
    slow, eng = _slow(pod), pod.engine
    for _ in range(k):
        pod.tick()
    parked = _park(pod, quiet)
    assert eng.export(neighbour.opened.id, park=True) is Pending.NEXT_TICK  # the spare holds the park's rows
    pod.tick()
    assert eng._held is not None  # not done yet: the spare stays held
    slow.land()
    pod.tick()  # the boundary frees the spare
    after = _wake(pod, quiet, parked, 2)
    pod.tick()  # its copy is in flight: it is not in this tick's batch
    assert eng.slot_of(after.opened.id) is None and eng.sessions() == 3 and after.outputs == []
    assert eng.export(after.opened.id) is Pending.NEXT_TICK
    pod.tick()
    assert eng.slot_of(after.opened.id) is None
    slow.land()
    pod.tick()  # done: it joins at this boundary, in this tick's batch
    assert eng.slot_of(after.opened.id) is not None and eng.running == 3
    for _ in range(TICKS - k - 1):
        pod.tick()
    _exact(quiet, after, want, k)
    n = min(len(neighbour.pcm), len(other.pcm))
    assert n >= TICKS and neighbour.pcm[:n] == other.pcm[:n]  # its park waited a tick: it ran on meanwhile


def test_two_wakes_at_once_land_one_a_boundary(tiny_model) -> None:
    """Two sessions parked one tick apart (one park holds the spare at a time) and woken together:
    the first joins at the next boundary, the second waits for the spare and joins at the one after;
    both continue bit-exact against their twins."""
    k = 5
    pod = _pod(tiny_model, park_copies="spare")
    wants = _twins(tiny_model, pod, ["NATF2", "NATM1"], TICKS + 2, park_copies="spare")
    a, b = pod.calls[1], pod.calls[2]
    eng = pod.engine
    for _ in range(k):
        pod.tick()
    first = _park(pod, a)
    assert eng.export(b.opened.id, park=True) is Pending.NEXT_TICK
    pod.tick()
    second = _park(pod, b)
    pod.tick()
    woken = [_wake(pod, a, first, 2), _wake(pod, b, second, 1)]
    pod.tick()
    assert eng.slot_of(woken[0].opened.id) is not None and eng.slot_of(woken[1].opened.id) is None
    pod.tick()
    assert eng.slot_of(woken[1].opened.id) is not None
    for _ in range(TICKS - k - 2):
        pod.tick()
    _exact(a, woken[0], wants[0], k)
    _exact(b, woken[1], wants[1], k + 1)


def test_a_regroup_waits_for_the_spare_and_runs_where_the_wake_lands(tiny_model) -> None:
    """A varying G that wants fewer groups while a wake's copy holds the spare its regroup would pass
    through: it keeps its groups until the copy is done, then at that boundary the wake lands first and
    the regroup takes it along; the woken session continues its twin, tokens exact (its groups'
    buckets are of other sizes than its twin's, so its PCM is within 2 LSB, as any batch's)."""
    k = 6
    pod = _pod(tiny_model, park_copies="spare", max_sessions=4, buckets=(1, 2, 4), tick_groups=0)
    want, = _twins(tiny_model, pod, ["NATF2"], TICKS + 2, park_copies="spare", max_sessions=4,
                   buckets=(1, 2, 4), tick_groups=0)
    quiet = pod.calls[1]
    slow, eng = _slow(pod), pod.engine
    for _ in range(k):
        pod.tick()
    parked = _park(pod, quiet)
    slow.land()
    pod.tick()
    after = _wake(pod, quiet, parked, 1)
    was, regroups = eng.tick_groups, eng._pulse.regroups
    eng._ticks = groups.Steps(dict.fromkeys(eng._buckets, 0.05))  # two turns no longer fit a period: G = 1
    if was == 1:
        eng._regroup(2)
        was = 2
    pod.tick()
    assert eng.tick_groups == was and eng._pulse.regroups == regroups and eng.slot_of(after.opened.id) is None
    slow.land()
    pod.tick()
    assert eng.tick_groups == 1 and eng._pulse.regroups == regroups + 1
    found = eng._find(after.opened.id)
    assert found is not None and int(eng.pools.tokens.pos[found[0].base + found[1]]) == found[0].rows[found[1]].pos
    for _ in range(TICKS - k - 1):
        pod.tick()
    assert after.outputs[0] == contract.Started(k) and len(after.pcm) >= TICKS - k - 2
    assert quiet.tokens[:k] + after.tokens == want.tokens[:k + len(after.tokens)]
    got = torch.frombuffer(bytearray(b"".join(quiet.pcm + after.pcm)), dtype=torch.int16).int()
    close = torch.frombuffer(bytearray(b"".join(want.pcm)), dtype=torch.int16).int()[:len(got)]
    assert int((got - close).abs().max()) <= 2  # its groups' buckets were other sizes: PCM within 2 LSB
