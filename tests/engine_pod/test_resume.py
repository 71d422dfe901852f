"""A PersonaPlex session whose pod is lost resumes on another engine from its checkpoints (issue
24 Part 3): the resumed session's token history (every column fed since the voice: its context)
equals the lost one's, before and after the window's wrap, and the first column it feeds is the
one the lost session would have fed but for this tick's caller code (its Mimi state is fresh)."""

from __future__ import annotations

import numpy as np
import pytest

from liveplex.continuity import Code, HandoverError, record
from liveplex.engine_pod.engine import PersonaPlexEngine
from liveplex.live import contract
from liveplex.live.channel import Opened
from tests.engine_pod import harness
from tests.engine_pod.test_handover import _pod

SESSION = contract.Session("NATF2", harness.SHORT_ROLE)


def _history(engine: PersonaPlexEngine, session_id: int) -> np.ndarray:
    slot = engine.slot_of(session_id)
    assert slot is not None
    return engine._groups[0].rows[slot].history.columns().copy()  # the engine's own record of what it fed


def _open(pod: harness.Pod, seed: int, ticks: int, state: bytes | None = None) -> harness.Call:
    opened = (pod.handle.start(SESSION, checkpoints=True) if state is None
              else pod.handle.resume(SESSION, state, checkpoints=True))
    assert isinstance(opened, Opened)
    call = harness.Call(opened, harness.caller_audio(seed, ticks))
    pod.calls.append(call)
    return call


@pytest.mark.parametrize("greedy, k, kv_dtype", [
    (True, 3, None), (False, 30, None),  # before the wrap (context 40), and past it sampled
    (False, 30, "fp8"),  # issue 36: the 8-bit ring is rebuilt from the record as from a handover
    pytest.param(True, 1, None, marks=pytest.mark.slow),
    pytest.param(True, 12, None, marks=pytest.mark.slow),
    pytest.param(True, 45, None, marks=pytest.mark.slow),
])
def test_a_resumed_session_has_the_lost_ones_context(tiny_model, greedy: bool, k: int, kv_dtype: str | None) -> None:
    a, b = _pod(tiny_model, greedy, kv_dtype=kv_dtype), _pod(tiny_model, greedy, kv_dtype=kv_dtype)
    a.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(5, k + 1))  # neighbours without checkpoints
    b.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(6, k + 1))
    lost = _open(a, 1, k + 1)
    b.tick()  # its neighbour runs when the record comes
    for _ in range(k):
        a.tick()
    checkpoints = [o for o in lost.outputs if isinstance(o, contract.Checkpoint)]
    assert len(checkpoints) == k and all(not isinstance(o, contract.Checkpoint) for o in a.calls[0].outputs)
    history = _history(a.engine, lost.opened.id)
    key = int(a.engine.pools.tokens.key[a.engine.slot_of(lost.opened.id)])
    a.tick()  # what the lost session would have fed next
    would = _history(a.engine, lost.opened.id)[-1]

    rec = b"".join(c.data for c in checkpoints)  # what the gateway kept
    resumed = _open(b, 9, 4, rec)
    b.tick()
    assert resumed.outputs[0] == contract.Started(k) and resumed.pcm and len(resumed.pcm) == 1
    assert [o.frame for o in resumed.outputs if isinstance(o, contract.Audio)] == [k]
    got = _history(b.engine, resumed.opened.id)
    assert np.array_equal(got[:-1], history)  # the context, column for column
    fed = got[-1]
    assert np.array_equal(fed[:9], would[:9]) and np.array_equal(fed[10:], would[10:])  # all but user cb0
    assert int(b.engine.pools.tokens.key[b.engine.slot_of(resumed.opened.id)]) == key
    if k > 20:
        assert len(history) + b.engine._groups[0].rows[0].history.first > tiny_model.cfg.context  # it had wrapped
    again = record.decode(b"".join(o.data for o in resumed.outputs if isinstance(o, contract.Checkpoint)))
    assert isinstance(again, record.Record) and again.frames == k + 1  # and records on from there


def test_a_record_with_an_id_out_of_range_or_cut_is_refused_before_started(tiny_model) -> None:
    a = _pod(tiny_model, True)
    lost = _open(a, 1, 3)
    for _ in range(3):
        a.tick()
    rec = b"".join(o.data for o in lost.outputs if isinstance(o, contract.Checkpoint))
    bad = bytearray(rec)
    bad[-2 * 25 - 34:-2 * 25 - 32] = (40000).to_bytes(2, "little")  # the last column's text id
    got = record.decode(bytes(bad))
    assert isinstance(got, record.Record)
    for data in (bytes(bad), rec[:-1]):
        b = _pod(tiny_model, True)
        call = _open(b, 2, 2, data)
        b.tick()
        assert call.outputs == [contract.Closed.refused(contract.CloseReason.ABORTED)]
    err = record.decode(rec[:-1])
    assert isinstance(err, HandoverError) and err.code is Code.MALFORMED
    assert err.param == "record[2]"  # the head, then two ticks chunks


@pytest.mark.slow
def test_a_session_past_its_history_cap_voids_its_record_once_and_stops_sending(tiny_model) -> None:
    a = _pod(tiny_model, True)
    lost = _open(a, 1, 90)
    for _ in range(90):  # past two windows of columns (context 40)
        a.tick()
    pieces = [o.data for o in lost.outputs if isinstance(o, contract.Checkpoint)]
    assert pieces[-1] == record.VOID_CHUNK and pieces.count(record.VOID_CHUNK) == 1
    assert len(pieces) < 90 and len(lost.pcm) == 90  # the session runs on; its record stopped
    err = record.decode(b"".join(pieces))
    assert isinstance(err, HandoverError) and err.code is Code.STATE and err.param == f"record[{len(pieces) - 1}]"
