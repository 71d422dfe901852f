"""`Connection` fed strings and engine outputs: the state table, echo rules, usage, close grace,
and the outcomes each input tells apart from its commands."""

from __future__ import annotations

import base64
import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.gptlive import connection as c
from liveplex.gptlive import errors, events
from liveplex.gptlive.served import Served
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.voices import BUILTIN, Voices
from liveplex.live import contract, frames
from liveplex.personaplex.voice_names import VOICES

MS = 1_000_000
INFO = contract.LiveInfo(model="liveplex-sim", sample_rate=24000, frame_samples=1920,
                         voices=VOICES, default_voice="NATF2",
                         default_instructions="You echo the caller.", max_instructions_chars=24,
                         max_sessions=2, max_frames=3000)
SETTINGS = Settings()
START = '{"type":"session.start","event_id":"s1","session":{"model":"gpt-live-1"}}'
FRAME = contract.Audio(0, bytes(frames.FRAME_BYTES))


def new(settings: Settings = SETTINGS) -> c.Connection:
    served = Served(INFO, Voices(VOICES, BUILTIN, ("custom1",)), ("gpt-live-1",))
    return c.Connection(served, settings, 0)


def told(conn: c.Connection) -> list[c.Outcome]:
    """The outcomes since the last call, taken as the pump takes them."""
    taken = conn.outcomes.copy()
    conn.outcomes.clear()
    return taken


def sent(actions: list[c.Command]) -> list[dict]:
    return [orjson.loads(events.dump(a.event)) for a in actions if isinstance(a, c.Send)]


def codes(actions: list[c.Command]) -> list[str]:
    return [e["error"]["code"] for e in sent(actions) if e["type"] == "error"]


def live(settings: Settings = SETTINGS, start: str = START) -> c.Connection:
    conn = new(settings)
    assert [type(a) for a in conn.receive(start, 0, 1000.0)] == [c.Start]
    conn.deliver([contract.Started()])
    assert conn.state is c.State.LIVE
    return conn


def msg(kind: str, event_id: str | None = None, **fields: object) -> str:
    body: dict[str, object] = {"type": kind, **fields}
    if event_id is not None:
        body["event_id"] = event_id
    return orjson.dumps(body).decode()


APPEND = msg("session.input_audio.append", "a1", audio=base64.b64encode(bytes(3840)).decode())


# --- the state table, row by row (gpt-live §3) ----------------------------------------------------

@pytest.mark.parametrize(("kind", "code"), [
    ("session.input_audio.append", "session_not_started"),
    ("session.input_audio.mute", "session_not_started"),
    ("session.input_audio.unmute", "session_not_started"),
    ("session.close", "session_not_started"),
])
def test_idle_refuses_every_command_but_start(kind: str, code: str) -> None:
    extra = {"audio": "AAAA"} if kind.endswith("append") else {}
    out = sent(new().receive(msg(kind, "a1", **extra), 0, 0.0))
    assert [(e["error"]["code"], e["error"]["param"], e["client_event_id"]) for e in out] == [
        (code, "type", "a1")]


def test_valid_start_stops_reading_until_started() -> None:
    conn = new()
    actions = conn.receive(START, 0, 1000.0)
    assert [a.session for a in actions] == [contract.Session("NATF2", "You echo the caller.")]
    assert not conn.reading and conn.state is c.State.STARTING
    with pytest.raises(RuntimeError):
        conn.receive(APPEND, 0, 0.0)
    started = sent(conn.deliver([contract.Started()]))[0]
    assert started["type"] == "session.started" and started["client_event_id"] == "s1"
    assert started["session"]["audio"] == {"format": {"type": "audio/pcm", "rate": 24000},
                                           "output": {"voice": "marin"}}
    assert started["session"]["expires_at"] == 1000 + 240 and conn.reading


def test_live_row() -> None:
    conn = live()
    assert codes(conn.receive(START, 0, 0.0)) == ["session_already_started"]
    assert [type(a) for a in conn.receive(APPEND, 0, 0.0)] == [c.Append]
    assert sent(conn.receive(msg("session.input_audio.mute", "m1"), 0, 0.0))[0][
        "client_event_id"] == "m1"
    assert sent(conn.receive(msg("session.input_audio.unmute"), 0, 0.0))[0].keys() == {
        "type", "event_id"}
    assert conn.receive(msg("session.close", "c1"), 0, 0.0) == [c.Hangup()]
    assert conn.state is c.State.CLOSING


def test_closing_row() -> None:
    conn = live()
    conn.receive(msg("session.close", "c1"), 0, 0.0)
    assert conn.receive(APPEND, 0, 0.0) == []
    for kind in ("session.start", "session.input_audio.mute", "session.input_audio.unmute",
                 "session.close"):
        extra = {"session": {"model": "gpt-live-1"}} if kind == "session.start" else {}
        assert codes(conn.receive(msg(kind, **extra), 0, 0.0)) == ["session_closing"]
    assert [type(a) for a in conn.deliver([FRAME])] == [c.Send]  # output keeps flowing
    out = conn.deliver([contract.Closed(contract.CloseReason.HANGUP, 5, 0, 0)])
    closed = sent(out)[0]
    assert (closed["reason"], closed["client_event_id"]) == ("close_requested", "c1")
    assert out[1:] == [c.Close(1000), c.Release()] and conn.state is c.State.DONE


@pytest.mark.parametrize("kind", sorted(events.REFUSED) + ["foo.bar"])
def test_refused_and_unknown_types_get_answers_in_every_state(kind: str) -> None:
    for conn in (new(), live()):
        assert codes(conn.receive(msg(kind, "r1"), 0, 0.0)) in (["unsupported_event"],
                                                                ["unknown_event"])
        assert conn.state in (c.State.IDLE, c.State.LIVE)


def test_done_ignores_everything() -> None:
    conn = live()
    conn.disconnect()
    assert conn.receive(APPEND, 0, 0.0) == [] and conn.deliver([FRAME]) == []


# --- validation order and session.start checks (gpt-live §4.4, §5) --------------------------------

def test_payload_errors_come_before_state_errors() -> None:
    conn = live()
    bad_model = '{"type":"session.start","session":{"model":"nope"}}'
    assert codes(conn.receive(bad_model, 0, 0.0)) == ["model_not_found"]
    assert codes(new().receive('{"type":"session.close","x":1}', 0, 0.0)) == ["unknown_parameter"]


@pytest.mark.parametrize(("voice", "native"), [("cedar", "NATM1"), ("NATM1", "NATM1"),
                                               ("NATM1.pt", "NATM1"), ({"id": "custom1"}, None)])
def test_voices_resolve_and_echo_as_named(voice: object, native: str | None) -> None:
    conn = new(Settings()) if native else new()
    start = orjson.dumps({"type": "session.start", "session": {
        "model": "liveplex-sim", "audio": {"output": {"voice": voice}}}}).decode()
    actions = conn.receive(start, 0, 0.0)
    if native is None:  # a registered id reaches LiveInfo.check, which knows only native names
        assert codes(actions) == ["invalid_value"]
        return
    assert [a.session for a in actions] == [contract.Session(native, "You echo the caller.")]
    assert sent(conn.deliver([contract.Started()]))[0]["session"]["audio"]["output"]["voice"] == voice


@pytest.mark.parametrize("voice", ["nope", {"id": "unknown"}])
def test_unknown_voices_are_invalid_values(voice: object) -> None:
    start = orjson.dumps({"type": "session.start", "session": {
        "model": "gpt-live-1", "audio": {"output": {"voice": voice}}}}).decode()
    out = sent(new().receive(start, 0, 0.0))[0]["error"]
    assert (out["code"], out["param"]) == ("invalid_value", "session.audio.output.voice")


def test_instructions_limit_counts_code_points() -> None:
    ok = orjson.dumps({"type": "session.start", "session": {
        "model": "gpt-live-1", "instructions": "🙂" * 24}}).decode()
    assert [type(a) for a in new().receive(ok, 0, 0.0)] == [c.Start]
    too_long = ok.replace("🙂" * 24, "🙂" * 25)
    out = sent(new().receive(too_long, 0, 0.0))[0]["error"]
    assert (out["code"], out["param"]) == ("string_above_max_length", "session.instructions")


def test_blank_instructions_use_the_default() -> None:
    conn = live(start='{"type":"session.start","session":{"model":"gpt-live-1","instructions":"  "}}')
    assert conn._resource is not None and conn._resource.instructions == "You echo the caller."


def test_info_events_follow_started_when_enabled() -> None:
    conn = new(Settings(info_events=True))
    conn.receive('{"type":"session.start","session":{"model":"gpt-live-1",'
                 '"audio":{"output":{"voice":"cedar"}}}}', 0, 0.0)
    assert [e.get("code") for e in sent(conn.deliver([contract.Started()]))] == [
        None, "voice_mapped", "default_instructions"]


def test_a_start_is_answered_with_the_start_answer_alone() -> None:
    """`START_ANSWER` is what a gateway swallows from the next pod of a moved session: all a start
    draws, whatever its notes."""
    conn = new(Settings(info_events=True))
    conn.receive('{"type":"session.start","session":{"model":"gpt-live-1","audio":{"output":{"voice":"cedar"}},'
                 '"delegation":{"type":"responses","responses":{"model":"m"}},'
                 '"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"%s"}]}]}}'
                 % ("x" * 30), 0, 0.0)
    answer = conn.deliver([contract.Started(frames=100)])
    assert [type(a.event) for a in answer if isinstance(a, c.Send)] == [
        events.SessionStarted, events.Info, events.Info, events.Info, events.Info]
    assert {type(a.event) for a in answer if isinstance(a, c.Send)} == set(c.START_ANSWER)


# --- capacity ---------------------------------------------------------------------------------------

def test_busy_keeps_the_socket_and_allows_a_retry() -> None:
    conn = new()
    conn.receive(START.replace("s1", "b1"), 0, 0.0)
    out = conn.deliver([contract.Closed.refused(contract.CloseReason.BUSY)])
    err = sent(out)[0]
    assert (err["error"]["type"], err["error"]["code"], err["error"]["param"],
            err["client_event_id"]) == ("server_error", "server_busy", None, "b1")
    assert out[1:] == [c.Release()] and conn.state is c.State.IDLE and conn.reading
    assert codes(conn.receive(msg("session.input_audio.mute"), 0, 0.0)) == ["session_not_started"]
    assert [type(a) for a in conn.receive(START, 0, 0.0)] == [c.Start]


@pytest.mark.parametrize("code", ["server_busy", "server_error"])
def test_rejected_starts_are_errors_without_a_session(code: str) -> None:
    conn = new()
    conn.receive(START, 0, 0.0)
    error = conn.busy() if code == "server_busy" else errors.server_error("stopped")
    out = conn.rejected(error)
    assert codes(out) == [code] and conn.state is c.State.IDLE
    assert told(conn) == [c.Refused(code)]


def test_outcomes_count_each_session_once() -> None:
    conn = new()
    assert codes(conn.receive(msg("session.start", session={"model": "nope"}), 0, 0.0)) == ["model_not_found"]
    assert told(conn) == [c.Refused("invalid")]
    assert [type(a) for a in conn.receive(START, 0, 0.0)] == [c.Start] and told(conn) == []
    assert [e["type"] for e in sent(conn.deliver([contract.Started()]))] == ["session.started"]
    assert told(conn) == [c.Accepted(conn._resource.id)]
    assert len(conn.deliver([FRAME] * 25)) == 25 and told(conn) == []  # no outcome per frame
    conn.deliver([contract.Closed(contract.CloseReason.EXPIRED, 25, 3, 7)])
    assert told(conn) == [c.Ended("expired", 2.0, 3, 7, conn._resource.id, 25)]
    assert conn.disconnect() == [] and told(conn) == []


def test_a_given_session_id_is_the_resource_id() -> None:
    served = Served(INFO, Voices(VOICES, BUILTIN, ()), ("gpt-live-1",))
    conn = c.Connection(served, SETTINGS, 0, session_id="sess_fromgateway")
    (start,) = conn.receive(START, 0, 0.0)
    assert start.resource.id == "sess_fromgateway" and start.text == START


def test_a_start_taken_by_an_upstream_is_accepted_and_ends_the_machine() -> None:
    conn = new()
    conn.receive(START, 0, 1000.0)
    handoff = conn.started_upstream(expires_at=4242)
    assert handoff is not None and handoff.resource.expires_at == 4242 and handoff.info == INFO
    assert told(conn) == [c.Accepted(handoff.resource.id)]
    assert conn.state is c.State.DONE and not conn.reading and conn.deadline_ns is None
    assert conn.disconnect() == [] and told(conn) == []
    assert conn.started_upstream() is None and new().started_upstream() is None


def test_start_with_no_answer_times_out_as_server_error() -> None:
    conn = new()
    conn.receive(START, 0, 0.0)
    assert conn.timer(29_999 * MS) == []
    out = conn.timer(30_000 * MS)
    assert codes(out) == ["server_error"] and out[-1] == c.Release() and conn.reading


# --- audio, usage, endings ---------------------------------------------------------------------------

@pytest.mark.parametrize(("audio", "why"), [("!!!!", "base64"), ("", "empty"), ("AA", "whole"),
                                            (base64.b64encode(bytes(1_440_002)).decode(), "30 s")])
def test_bad_chunks_are_invalid_values_and_the_session_continues(audio: str, why: str) -> None:
    conn = live()
    err = sent(conn.receive(msg("session.input_audio.append", "x", audio=audio), 0, 0.0))[0]
    assert (err["error"]["code"], err["error"]["param"], err["client_event_id"]) == (
        "invalid_value", "audio", "x")
    assert why in err["error"]["message"] and conn.state is c.State.LIVE


def test_unpadded_base64_is_accepted() -> None:
    conn = live()
    assert conn.receive(msg("session.input_audio.append", audio="AAAAAA"), 0, 0.0) == [
        c.Append(bytes(4))]


def _standard_base64(text: str) -> bytes | None:
    """The reference: the alphabet, then `=` only towards completing the last quad (optional)."""
    body = text.rstrip("=")
    if len(text) - len(body) > -len(body) % 4 or len(body) % 4 == 1:
        return None
    if body.strip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"):
        return None
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except ValueError:
        return None


@settings(max_examples=1000, deadline=None)
@given(st.one_of(st.text(alphabet="AQ=!", max_size=10), st.text(alphabet="AQgw/+=!\n é")))
def test_append_base64_is_strict_standard_base64_padding_optional(audio: str) -> None:
    conn = live()
    out = conn.receive(msg("session.input_audio.append", audio=audio), 0, 0.0)
    raw = _standard_base64(audio)
    if raw and len(raw) % 2 == 0:
        assert out == [c.Append(raw)]
    else:
        assert codes(out) == ["invalid_value"] and conn.state is c.State.LIVE
    if raw is None:
        assert "base64" in sent(out)[0]["error"]["message"]


def test_padding_after_a_complete_quad_is_not_base64() -> None:
    # CPython 3.11's strict decoder accepts "AAAA=" as three bytes; gpt-live §6.1 does not
    out = live().receive(msg("session.input_audio.append", audio="AAAA="), 0, 0.0)
    assert codes(out) == ["invalid_value"] and "base64" in sent(out)[0]["error"]["message"]


def test_mute_replaces_audio_with_zeros_of_the_same_length() -> None:
    conn = live()
    loud = base64.b64encode(b"\x10\x27" * 480).decode()
    conn.receive(msg("session.input_audio.mute"), 0, 0.0)
    assert conn.receive(msg("session.input_audio.append", audio=loud), 0, 0.0) == [
        c.Append(bytes(960))]
    conn.receive(msg("session.input_audio.unmute"), 0, 0.0)
    assert conn.receive(msg("session.input_audio.append", audio=loud), 0, 0.0) == [
        c.Append(b"\x10\x27" * 480)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=60), st.integers(1000, 9000))
def test_usage_every_period_of_session_time_cumulative_and_matching_frames(
        batches: list[int], period_ms: int) -> None:
    conn = live(Settings(usage_period_ms=period_ms))
    usage, frames_sent = [], 0
    for n in batches:
        for e in sent(conn.deliver([FRAME] * n)):
            if e["type"] == "session.output_audio.delta":
                frames_sent += 1
            elif e["type"] == "session.usage.updated":
                assert e.keys() == {"type", "event_id", "usage"}
                usage.append((frames_sent, e["usage"]["seconds"]))
    assert len(usage) == frames_sent * 80 // period_ms
    for k, (count, seconds) in enumerate(usage, 1):
        assert count * 80 >= k * period_ms > (count - 1) * 80  # the first frame past each mark
        assert seconds == round(count * 0.08, 2)


def test_no_usage_after_close() -> None:
    conn = live(Settings(usage_period_ms=80))
    conn.receive(msg("session.close"), 0, 0.0)
    assert [e["type"] for e in sent(conn.deliver([FRAME] * 3))] == [
        "session.output_audio.delta"] * 3


def test_close_grace_sends_closed_anyway() -> None:
    conn = live(Settings(close_grace_ms=2000))
    conn.deliver([FRAME] * 4)
    conn.receive(msg("session.close", "c1"), 10 * MS, 0.0)
    assert conn.timer(2009 * MS) == []
    out = conn.timer(2010 * MS)
    closed = sent(out)[0]
    assert (closed["reason"], closed["client_event_id"], closed["usage"]["seconds"]) == (
        "close_requested", "c1", 0.32)
    assert out[1:] == [c.Close(1000), c.Release()]
    assert conn.deliver([contract.Closed(contract.CloseReason.HANGUP, 4, 0, 0)]) == []


def test_expired_closes_normally_with_the_final_usage() -> None:
    conn = live()
    started = sent([c.Send(events.SessionStarted(conn._resource))])[0]["session"]
    conn.deliver([FRAME] * 62)
    out = conn.deliver([contract.Closed(contract.CloseReason.EXPIRED, 62, 0, 0)])
    closed = sent(out)[0]
    assert (closed["reason"], closed["usage"]["seconds"]) == ("expired", 4.96)
    assert closed["session"] == started and "client_event_id" not in closed
    assert out[1:] == [c.Close(1000), c.Release()]


@pytest.mark.parametrize("ending", [[contract.Closed(contract.CloseReason.ABORTED, 3, 0, 0)], []])
def test_engine_fault_is_server_error_then_connection_lost_then_1011(ending: list) -> None:
    conn = live()
    out = conn.deliver(ending)
    assert [e["type"] for e in sent(out)] == ["error", "session.closed"]
    assert codes(out) == ["server_error"] and sent(out)[1]["reason"] == "connection_lost"
    assert out[2:] == [c.Close(1011), c.Release()]


def test_transcript_sits_on_the_audio_timeline() -> None:
    conn = live()
    out = sent(conn.deliver([contract.Audio(7, bytes(3840)), contract.Text(7, " hear")]))
    assert (out[1]["start_ms"], out[1]["end_ms"], out[1]["delta"]) == (560, 640, " hear")
    assert "client_event_id" not in out[1]


def test_idle_guard_closes_without_events_and_restarts_on_each_message() -> None:
    conn = new(Settings(idle_guard_ms=60_000))
    conn.receive("garbage", 50_000 * MS, 0.0)
    assert conn.timer(60_000 * MS) == []
    assert conn.timer(110_000 * MS) == [c.Close(1000)]


def test_a_handed_over_session_ends_without_session_closed_and_closes_with_the_given_code() -> None:
    conn = live()
    conn.deliver([FRAME] * 13)
    out = conn.handed_over(4100)
    assert sent(out) == [] and out == [c.Release(), c.Close(4100)]
    (_, ended) = told(conn)
    assert isinstance(ended, c.Ended) and (ended.reason, ended.frames) == ("handed_over", 13)
    assert conn.state is c.State.DONE and conn.handed_over(4100) == [] and new().handed_over(4100) == []


def test_a_session_started_after_a_handover_counts_usage_on_from_its_frames() -> None:
    conn = new()
    conn.receive(START, 0, 1000.0)
    conn.deliver([contract.Started(frames=100)])  # 8.0 s ran on another pod
    usage = [e["usage"]["seconds"] for e in sent(conn.deliver([FRAME] * 40))
             if e["type"] == "session.usage.updated"]
    assert usage == [10.0] and conn.frames_sent == 140  # the next period's, once
    assert conn.disconnect() == [c.Release()]
    (_, ended) = told(conn)
    assert isinstance(ended, c.Ended) and (ended.seconds, ended.frames) == (11.2, 140)


def test_disconnect_releases_a_running_session_and_shutdown_says_so() -> None:
    assert live().disconnect() == [c.Release()]
    out = live().shutdown()
    assert codes(out) == ["server_shutdown"] and sent(out)[1]["reason"] == "connection_lost"
    assert out[2:] == [c.Close(1001), c.Release()]


def test_legal_table_covers_every_supported_command_in_every_read_state() -> None:
    for state in (c.State.IDLE, c.State.LIVE, c.State.CLOSING):
        assert set(c.LEGAL[state]) == set(events.SUPPORTED)


# --- the error budget ------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.lists(st.integers(0, 300_000), min_size=1, max_size=400))
def test_errors_come_at_most_a_budget_per_second_and_every_bad_event_is_answered(
        budget: int, gaps_us: list[int]) -> None:
    """A pump that reads only while `reading` and calls `timer` whenever it gets a turn: bad events
    arriving `gaps_us` apart are all answered, in order, never more than `budget` in one window
    (so at most two budgets in any second)."""
    conn = new(Settings(errors_per_s=budget))
    backlog: list[str] = []
    answers: list[tuple[int, str]] = []
    now = 0

    def pump() -> None:
        conn.timer(now)
        while backlog and conn.reading:
            for error in sent(conn.receive(backlog.pop(0), now, 0.0)):
                answers.append((now, error["client_event_id"]))

    for i, gap in enumerate(gaps_us):
        now += gap * 1000
        backlog.append(msg("session.close", f"e{i}"))
        pump()
    while backlog:  # the sweeper's later turns
        assert conn.deadline_ns is not None and not conn.reading
        now = max(now, conn.deadline_ns)
        pump()
    assert [event_id for _, event_id in answers] == [f"e{i}" for i in range(len(gaps_us))]
    times = [t for t, _ in answers]
    for i, t in enumerate(times):
        assert sum(1 for u in times[i:] if u < t + 1_000 * MS) <= 2 * budget


def test_a_quiet_spell_ends_with_the_second_and_keeps_the_idle_guard() -> None:
    conn = new(Settings(errors_per_s=2, idle_guard_ms=60_000))
    conn.receive("x", 100 * MS, 0.0)
    assert conn.reading
    conn.receive("x", 200 * MS, 0.0)
    assert not conn.reading and conn.deadline_ns == 1_000 * MS
    assert conn.timer(1_000 * MS) == [] and conn.reading
    assert conn.deadline_ns == 60_200 * MS
    assert conn.timer(60_200 * MS) == [c.Close(1000)]


# --- what GPT-Live clients send (issue 21: LiveKit, Pipecat, openai 3.57) --------------------------

def start_with(**session: object) -> str:
    return orjson.dumps({"type": "session.start", "event_id": "s1",
                         "session": {"model": "gpt-live-1", **session}}).decode()


def turn(role: str, text: str) -> dict[str, object]:
    return {"role": role, "content": [{"text": text}]}


def started(conn: c.Connection, start: str) -> tuple[c.Start, list[dict]]:
    [begin] = conn.receive(start, 0, 1000.0)
    assert isinstance(begin, c.Start)
    return begin, sent(conn.deliver([contract.Started()]))


def test_commentary_is_acked_at_the_timeline_and_said_by_the_engine() -> None:
    conn = live()
    conn.deliver([FRAME] * 3)
    actions = conn.receive(msg("session.commentary.append", "k1", content="Welcome back!"), 0, 0.0)
    [ack] = sent(actions)
    assert ack == {"type": "session.commentary.appended", "event_id": ack["event_id"], "start_ms": 240,
                   "end_ms": 240, "client_event_id": "k1"}
    assert actions[1:] == [c.Say("Welcome back!")]
    conn.receive(msg("session.close"), 0, 0.0)
    assert codes(conn.receive(msg("session.commentary.append", content="late"), 0, 0.0)) == ["session_closing"]


def test_history_folds_into_the_role_prompt_newest_kept_and_the_drop_is_told() -> None:
    info = dataclasses.replace(INFO, max_instructions_chars=75)
    conn = c.Connection(Served(info, Voices(VOICES, BUILTIN, ()), ("gpt-live-1",)), SETTINGS, 0)
    begin, out = started(conn, start_with(input=[turn("user", "first"), turn("assistant", "second"),
                                                 turn("user", "third")]))
    assert begin.session.instructions == ("You echo the caller.\n\nConversation so far:\nAssistant: second"
                                          "\nUser: third")
    assert out[0]["session"]["instructions"] == "You echo the caller."  # the resource: instructions alone
    assert "input" not in out[0]["session"]
    [note] = out[1:]
    assert (note["type"], note["code"], note["client_event_id"]) == ("info", "input_truncated", "s1")
    assert "1 oldest of the 3" in note["message"]


def test_history_that_fits_is_folded_whole_without_a_note() -> None:
    info = dataclasses.replace(INFO, max_instructions_chars=200)
    conn = c.Connection(Served(info, Voices(VOICES, BUILTIN, ()), ("gpt-live-1",)), SETTINGS, 0)
    begin, out = started(conn, start_with(instructions="Be kind.", input=[turn("developer", "Name: Ada"),
                                                                          turn("user", "hi")]))
    assert begin.session.instructions == "Be kind.\n\nConversation so far:\nDeveloper: Name: Ada\nUser: hi"
    assert [e["type"] for e in out] == ["session.started"]


def test_responses_delegation_is_echoed_and_the_session_says_it_never_delegates() -> None:
    config = {"model": "gpt-5", "tools": [{"type": "web_search"}]}
    _, out = started(new(), start_with(delegation={"type": "responses", "responses": config}))
    assert out[0]["session"]["delegation"] == {"type": "responses", "responses": config}
    assert [(e["type"], e.get("code")) for e in out[1:]] == [("info", "delegation_unused")]
    assert not any(e["type"].startswith(("session.delegation", "response.")) for e in out)


def test_safety_identifier_is_kept_in_the_resource_and_the_end() -> None:
    conn = new()
    _, out = started(conn, start_with(safety_identifier="user-42"))
    assert out[0]["session"]["safety_identifier"] == "user-42"
    conn.disconnect()
    [_, ended] = told(conn)
    assert isinstance(ended, c.Ended) and ended.safety_identifier == "user-42"
    _, out = started(new(), start_with(safety_identifier=None))
    assert "safety_identifier" not in out[0]["session"]


def test_usage_reports_the_context_window_only_when_the_engine_has_one() -> None:
    windowed = dataclasses.replace(INFO, context_frames=100)
    conn = c.Connection(Served(windowed, Voices(VOICES, BUILTIN, ()), ("gpt-live-1",)),
                        Settings(usage_period_ms=4000), 0)
    started(conn, START)
    usage = [e for e in sent(conn.deliver([FRAME] * 150)) if e["type"] == "session.usage.updated"]
    assert [(u["usage"]["seconds"], u["context_window"]) for u in usage] == [
        (4.0, {"usage_ratio": 0.5}), (8.0, {"usage_ratio": 1.0}), (12.0, {"usage_ratio": 1.0})]
    assert "context_window" not in [e for e in sent(live(Settings(usage_period_ms=80)).deliver([FRAME]))
                                    if e["type"] == "session.usage.updated"][0]


# --- a media session's wake policy (docs/pause.md) ---------------------------------------------------

WAKE = {"model": "gpt-live-1", "wake_policy": {"type": "speech", "vad_threshold": 0.7}, "idle_timeout_s": 3}


def _media(pauses: bool) -> c.Connection:
    served = Served(INFO, Voices(VOICES, BUILTIN), ("gpt-live-1",), pauses=pauses)
    return c.Connection(served, SETTINGS, 0, media=True)


@pytest.mark.parametrize(("media", "pauses", "session", "code", "param"), [
    (False, True, WAKE, "unknown_parameter", "session.wake_policy"),  # a socket's start has no such field
    (False, True, {"model": "gpt-live-1", "idle_timeout_s": 3}, "unknown_parameter", "session.idle_timeout_s"),
    (True, True, {"model": "gpt-live-1", "idle_timeout_s": 3}, "missing_required_parameter",
     "session.wake_policy"),
    (True, False, WAKE, "unsupported_parameter", "session.wake_policy"),  # engines that cannot pause
])
def test_a_wake_policy_is_a_media_sessions_and_needs_engines_that_pause(
        media: bool, pauses: bool, session: dict, code: str, param: str) -> None:
    conn = c.Connection(_media(pauses).catalog, SETTINGS, 0, media=media)
    error = sent(conn.receive(msg("session.start", session=session), 0, 0.0))[0]["error"]
    assert (error["code"], error["param"]) == (code, param)
    if code == "unsupported_parameter":
        assert error["message"].endswith(c.start.NOT_PAUSING)


def test_a_call_with_a_wake_policy_starts_with_it_and_bills_its_wait_as_paused() -> None:
    conn = _media(pauses=True)
    start = conn.receive(msg("session.start", session=WAKE), 0, 0.0)[0]
    assert isinstance(start, c.Start) and start.wake == c.start.Wake(0.7, 3)
    conn.deliver([contract.Started()])
    woke = sent(conn.deliver([contract.Resumed(25), *[FRAME] * 13]))  # 2 s waiting, then ~1 s in the engine
    assert woke[0]["type"] == "session.resumed"
    conn.receive(msg("session.close"), 0, 0.0)
    closed = sent(conn.deliver([contract.Closed(contract.CloseReason.HANGUP, 13, 0, 0)]))[0]
    assert closed["usage"] == {"seconds": 3, "active_seconds": 1, "paused_seconds": 2}
