"""A sim session whose pod is lost resumes on another sim from its checkpoints (issue 24 Part 3):
the concatenated record starts a session that goes on with the frame count, usage and the echo's
words; its delayed frames and jitter buffer start empty (docs/continuity.md)."""

from __future__ import annotations

import pytest

from liveplex.continuity import Code, HandoverError, record
from liveplex.live import Audio, Closed, CloseReason, Session, Started, Text
from liveplex.live.channel import Opened
from liveplex.live.contract import Checkpoint
from liveplex.sim_pod import SimProfile
from tests.sim_pod.test_handover import PROFILE, SESSION, TICKS, Pod, caller


def _run_with_checkpoints(k: int) -> tuple[list, bytes, Pod]:
    """A session with checkpoints and a neighbour without, `k` ticks; its outputs and record."""
    pod = Pod()
    plain = pod.handle.start(SESSION)
    opened = pod.handle.start(SESSION, checkpoints=True)
    assert isinstance(opened, Opened) and isinstance(plain, Opened)
    audio, out = caller(k), []
    for t in range(k):
        opened.audio.send(audio[t])
        pod.tick()
        out += opened.output.drain()
    assert not any(isinstance(o, Checkpoint) for o in plain.output.drain())  # only those asked for
    return out, b"".join(o.data for o in out if isinstance(o, Checkpoint)), pod


@pytest.mark.parametrize("k", [1, 7, 20])
def test_a_resumed_sim_session_continues_frames_usage_and_words(k: int) -> None:
    out, rec, _ = _run_with_checkpoints(k)
    assert isinstance(out[1], Checkpoint) and out[1].data[:1] == record.HEAD  # right after Started
    said = [o for o in out if isinstance(o, Text)]
    assert sum(isinstance(o, Audio) for o in out) == k
    b = Pod()
    resumed = b.handle.resume(SESSION, rec, checkpoints=True)
    assert isinstance(resumed, Opened)
    after, audio = [], caller(TICKS + 1)
    for t in range(k, TICKS):
        resumed.audio.send(audio[t])
        b.tick()
        after += resumed.output.drain()
    assert after[0] == Started(k)
    frames = [o.frame for o in after if isinstance(o, Audio)]
    assert frames == list(range(k, TICKS))
    rec_b = record.decode(b"".join(o.data for o in after if isinstance(o, Checkpoint)))
    assert isinstance(rec_b, record.Record) and rec_b.frames == TICKS  # it keeps a record of its own
    words = "".join(o.delta for o in said + [o for o in after if isinstance(o, Text)]).split()
    cycle = ["I", "hear", "you", "loud", "and", "clear."]
    assert len(words) >= 3 and words == [cycle[i % 6] for i in range(len(words))]  # the echo's words go on
    resumed.audio.close()
    b.tick()
    closed = resumed.output.drain()[-1]
    assert isinstance(closed, Closed) and closed.frames == TICKS  # usage counts the whole call


def _retailed(rec: bytes) -> bytes:
    """The record's head saying another tail size, and no ticks chunk."""
    got = record.decode(rec)
    assert isinstance(got, record.Record)
    return record.head(got.head.header, {}, 0, 4)


@pytest.mark.parametrize("data, voice", [
    (lambda rec: rec, "NATM1"),                        # another voice than the record's
    (lambda rec: rec[:-3], "NATF2"),                   # cut short
    (lambda rec: rec + record.VOID_CHUNK, "NATF2"),    # void
    (lambda rec: _retailed(rec), "NATF2"),             # a tail the sim does not read
])
def test_a_record_that_does_not_fit_is_refused_before_started(data, voice: str) -> None:
    _, rec, _ = _run_with_checkpoints(3)
    b = Pod()
    opened = b.handle.resume(Session(voice=voice, instructions="x"), data(rec))
    assert isinstance(opened, Opened)
    b.tick()
    assert opened.output.drain() == [Closed.refused(CloseReason.ABORTED)] and b.engine.sessions() == 0


def test_the_record_names_what_is_wrong() -> None:
    _, rec, _ = _run_with_checkpoints(3)
    err = record.peek(rec, SimProfile(echo_frames=PROFILE.echo_frames + 1).info())
    assert isinstance(err, HandoverError) and err.code is Code.ENGINE
    assert err.param == "header.engine.echo_frames"
    assert len(rec) < 200 + 3 * 20  # a head of ~200 bytes, then 19 bytes a tick
