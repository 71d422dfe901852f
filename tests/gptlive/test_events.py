"""`events.parse` / `events.dump`: strict validation, exact param paths, gpt-live §4.4 order."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.gptlive import events
from liveplex.gptlive.errors import Code


def _error(data: str | bytes) -> tuple[str, str | None, str | None]:
    out = events.parse(data)
    assert isinstance(out, events.Invalid), out
    return out.error.code.value, out.error.param_text, out.event_id


def _start(session: object, **envelope: object) -> str:
    return orjson.dumps({"type": "session.start", "session": session, **envelope}).decode()


# --- roundtrip ----------------------------------------------------------------------------------

_ids = st.none() | st.text(max_size=12)
_formats = st.sampled_from([events.AudioFormat("audio/pcm", 24000), events.AudioFormat("audio/pcm", 16000),
                            events.AudioFormat("audio/pcmu", 8000), events.AudioFormat("audio/pcma", 8000)])
_voices = st.none() | st.text(max_size=8) | st.builds(events.CustomVoice, st.text(max_size=8))
_delays = st.none() | st.integers(0, 10**6)
_responses = st.fixed_dictionaries({"model": st.text(max_size=8)},
                                   optional={"instructions": st.none() | st.text(max_size=8),
                                             "tools": st.just([{"type": "web_search"}])})
_turns = st.lists(st.builds(events.Turn, st.sampled_from(["developer", "user", "assistant"]),
                            st.text(max_size=12)), max_size=4).map(tuple)
_configs = st.builds(events.SessionConfig, model=st.text(max_size=10), instructions=st.none() | st.text(),
                     format=st.none() | _formats, voice=_voices,
                     delegation=st.none() | st.builds(events.ClientDelegation, _delays)
                     | st.builds(events.ResponsesDelegation, _responses, _delays),
                     input=_turns, safety_identifier=st.none() | st.text(max_size=64),
                     wake_policy=st.none() | st.builds(events.WakePolicy, st.floats(0, 1)),
                     idle_timeout_s=st.none() | st.integers(1, events.MAX_IDLE_TIMEOUT_S))
_client_events = st.one_of(
    st.builds(events.SessionStart, _configs, _ids),
    st.builds(events.InputAudioAppend, st.text(alphabet="AB+/=", max_size=16), _ids),
    st.builds(events.InputAudioMute, _ids),
    st.builds(events.InputAudioUnmute, _ids),
    st.builds(events.SessionClose, _ids),
    st.builds(events.CommentaryAppend, st.text(max_size=20).filter(str.strip), _ids),
)


@given(_client_events)
def test_parse_of_dump_is_identity(event: events.ClientEvent) -> None:
    assert events.parse(events.dump(event)) == event


@given(st.sampled_from(list(events.REFUSED)) | st.just("session.start"))
def test_type_is_serialised_first(kind: str) -> None:
    text = events.dump(events.Error(events.errors.unknown_event(kind), "x"))
    assert text.startswith('{"type":"error"')


def test_audio_delta_is_exactly_type_and_delta() -> None:
    assert orjson.loads(events.dump(events.OutputAudioDelta("AAAA"))) == {
        "type": "session.output_audio.delta", "delta": "AAAA"}


def test_error_event_echoes_client_event_id_twice_and_param_null() -> None:
    text = events.dump(events.Error(events.errors.server_busy(4), "b1"))
    body = orjson.loads(text)
    assert body["client_event_id"] == "b1" and body["error"]["client_event_id"] == "b1"
    assert body["error"]["param"] is None and body["error"]["type"] == "server_error"
    assert orjson.loads(events.dump(events.Error(events.errors.server_busy(4))))["error"].keys() == {
        "type", "code", "message", "param"}


def test_event_ids_are_unique_and_prefixed() -> None:
    ids = {events.new_event_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(i.startswith("event_") for i in ids)


# --- steps 1-4 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("data", ["not json", "[1,2]", '"x"', b'{"type":"session.close"}', "1"])
def test_non_objects_and_binary_are_invalid_json(data: str | bytes) -> None:
    assert _error(data) == ("invalid_json", None, None)


def test_event_id_of_wrong_type_is_not_echoed() -> None:
    assert _error('{"type":"session.close","event_id":5}') == ("invalid_type", "event_id", None)


def test_missing_type_echoes_event_id() -> None:
    assert _error('{"event_id":"x"}') == ("missing_required_parameter", "type", "x")
    assert _error('{"event_id":"x","type":3}') == ("invalid_type", "type", "x")


@pytest.mark.parametrize("kind", sorted(events.REFUSED))
def test_refused_types_are_refused_by_name_whatever_the_payload(kind: str) -> None:
    out = events.parse(orjson.dumps({"type": kind, "event_id": "r", "garbage": [1, {"x": 2}]}).decode())
    assert isinstance(out, events.Invalid)
    assert (out.error.code, out.error.param_text, out.event_id) == (Code.UNSUPPORTED_EVENT, "type", "r")
    assert kind in out.error.message


@pytest.mark.parametrize("kind", ["foo.bar", "input_audio_buffer.append", "response.cancel"])
def test_unknown_types_are_unknown_events(kind: str) -> None:
    code, param, _ = _error(orjson.dumps({"type": kind}).decode())
    assert (code, param) == ("unknown_event", "type")


def test_event_id_is_checked_before_type() -> None:
    assert _error('{"event_id":[],"type":"foo"}')[0] == "invalid_type"


def test_type_is_checked_before_payload() -> None:
    assert _error('{"type":"foo","session":{"bad":1}}')[0] == "unknown_event"


# --- step 5: the checklist's worked examples (gpt-live §14, items 9-16, 33) ----------------------

@pytest.mark.parametrize(("message", "code", "param"), [
    ('{"type":"session.start"}', "missing_required_parameter", "session"),
    (_start({}), "missing_required_parameter", "session.model"),
    (_start("x"), "invalid_type", "session"),
    (_start({"model": "m"}, foo=1), "unknown_parameter", "foo"),
    (_start({"model": "m"}, client_event_id="x"), "unknown_parameter", "client_event_id"),
    (_start({"model": "m", "foo": 1}), "unknown_parameter", "session.foo"),
    (_start({"model": "m", "audio": {"input": {}}}), "unknown_parameter", "session.audio.input"),
    (_start({"model": "m", "audio": {"output": {"speed": 1}}}), "unknown_parameter",
     "session.audio.output.speed"),
    (_start({"model": "m", "instructions": 42}), "invalid_type", "session.instructions"),
    (_start({"model": "m", "audio": {"format": {"type": "audio/pcm", "rate": 44100}}}),
     "invalid_value", "session.audio.format.rate"),
    (_start({"model": "m", "audio": {"format": {"type": "audio/pcm", "rate": 24000.0}}}),
     "invalid_type", "session.audio.format.rate"),
    (_start({"model": "m", "audio": {"format": {"type": "audio/wav", "rate": 24000}}}),
     "invalid_value", "session.audio.format.type"),
    (_start({"model": "m", "audio": {"format": {"type": "audio/pcmu", "rate": 16000}}}),
     "unsupported_value", "session.audio.format.rate"),
    (_start({"model": "m", "audio": {"format": {"rate": 8000}}}), "missing_required_parameter",
     "session.audio.format.type"),
    (_start({"model": "m", "audio": {"format": {"type": "audio/pcma"}}}),
     "missing_required_parameter", "session.audio.format.rate"),
    (_start({"model": "m", "delegation": {"type": "responses"}}), "missing_required_parameter",
     "session.delegation.responses"),
    (_start({"model": "m", "delegation": {"type": "responses", "responses": {}}}), "missing_required_parameter",
     "session.delegation.responses.model"),
    (_start({"model": "m", "delegation": {"type": "responses", "responses": {"model": "x", "tools": {}}}}),
     "invalid_type", "session.delegation.responses.tools"),
    (_start({"model": "m", "delegation": {"type": "responses", "responses": {"model": "x", "foo": 1}}}),
     "unknown_parameter", "session.delegation.responses.foo"),
    (_start({"model": "m", "delegation": {"type": "client", "responses": {"model": "x"}}}),
     "unknown_parameter", "session.delegation.responses"),
    (_start({"model": "m", "delegation": {"type": "decisions"}}), "unsupported_value",
     "session.delegation.type"),
    (_start({"model": "m", "delegation": {"type": "foo"}}), "invalid_value", "session.delegation.type"),
    (_start({"model": "m", "delegation": {"type": "client", "acknowledgement_delay_ms": True}}),
     "invalid_type", "session.delegation.acknowledgement_delay_ms"),
    (_start({"model": "m", "store": "yes"}), "invalid_type", "session.store"),
    (_start({"model": "m", "store": 1}), "invalid_type", "session.store"),
    (_start({"model": "m", "input": {}}), "invalid_type", "session.input"),
    (_start({"model": "m", "input": ["hi"]}), "invalid_type", "session.input[0]"),
    (_start({"model": "m", "input": [{"x": 1}]}), "unknown_parameter", "session.input[0].x"),
    (_start({"model": "m", "input": [{"content": []}]}), "missing_required_parameter", "session.input[0].role"),
    (_start({"model": "m", "input": [{"role": "system", "content": []}]}), "invalid_value",
     "session.input[0].role"),
    (_start({"model": "m", "input": [{"role": "user", "type": "function_call", "content": []}]}), "invalid_value",
     "session.input[0].type"),
    (_start({"model": "m", "input": [{"role": "user", "status": "done", "content": []}]}), "invalid_value",
     "session.input[0].status"),
    (_start({"model": "m", "input": [{"role": "user"}]}), "missing_required_parameter", "session.input[0].content"),
    (_start({"model": "m", "input": [{"role": "user", "content": "hi"}]}), "invalid_type",
     "session.input[0].content"),
    (_start({"model": "m", "input": [{"role": "user", "content": []}]}), "invalid_value",
     "session.input[0].content"),
    (_start({"model": "m", "input": [{"role": "user", "content": [{"text": "a"}, {"text": "b"}]}]}),
     "invalid_value", "session.input[0].content"),
    (_start({"model": "m", "input": [{"role": "user", "content": [{"text": "a"}]},
                                     {"role": "user", "content": [{"type": "output_text", "text": "b"}]}]}),
     "invalid_value", "session.input[1].content[0].type"),
    (_start({"model": "m", "input": [{"role": "assistant", "content": [{"type": "output_text"}]}]}),
     "missing_required_parameter", "session.input[0].content[0].text"),
    (_start({"model": "m", "input": [{"role": "assistant", "content": [{"text": 1}]}]}),
     "invalid_type", "session.input[0].content[0].text"),
    (_start({"model": "m", "input": [{"role": "user", "content": [{"text": "a", "audio": "x"}]}]}),
     "unknown_parameter", "session.input[0].content[0].audio"),
    (_start({"model": "m", "triggers": [{}]}), "unsupported_parameter", "session.triggers"),
    (_start({"model": "m", "client": {}}), "unsupported_parameter", "session.client"),
    (_start({"model": "m", "safety_identifier": 7}), "invalid_type", "session.safety_identifier"),
    (_start({"model": "m", "wake_policy": "speech"}), "invalid_type", "session.wake_policy"),
    (_start({"model": "m", "wake_policy": {}}), "missing_required_parameter", "session.wake_policy.type"),
    (_start({"model": "m", "wake_policy": {"type": "vad"}}), "invalid_value", "session.wake_policy.type"),
    (_start({"model": "m", "wake_policy": {"type": "speech", "x": 1}}), "unknown_parameter",
     "session.wake_policy.x"),
    (_start({"model": "m", "wake_policy": {"type": "speech", "vad_threshold": "0.5"}}), "invalid_type",
     "session.wake_policy.vad_threshold"),
    (_start({"model": "m", "wake_policy": {"type": "speech", "vad_threshold": True}}), "invalid_type",
     "session.wake_policy.vad_threshold"),
    (_start({"model": "m", "wake_policy": {"type": "speech", "vad_threshold": 1.5}}), "invalid_value",
     "session.wake_policy.vad_threshold"),
    (_start({"model": "m", "wake_policy": {"type": "speech", "vad_threshold": -0.1}}), "invalid_value",
     "session.wake_policy.vad_threshold"),
    (_start({"model": "m", "idle_timeout_s": 2.5}), "invalid_type", "session.idle_timeout_s"),
    (_start({"model": "m", "idle_timeout_s": 0}), "invalid_value", "session.idle_timeout_s"),
    (_start({"model": "m", "idle_timeout_s": 3601}), "invalid_value", "session.idle_timeout_s"),
    (_start({"model": "m", "safety_identifier": "u" * 65}), "string_above_max_length", "session.safety_identifier"),
    (_start({"model": "m", "audio": {"output": {"voice": {"id": "x", "extra": 1}}}}),
     "unknown_parameter", "session.audio.output.voice.extra"),
    (_start({"model": "m", "audio": {"output": {"voice": {}}}}), "missing_required_parameter",
     "session.audio.output.voice.id"),
    (_start({"model": "m", "audio": {"output": {"voice": 7}}}), "invalid_type",
     "session.audio.output.voice"),
    ('{"type":"session.input_audio.mute","foo":1}', "unknown_parameter", "foo"),
    ('{"type":"session.input_audio.append"}', "missing_required_parameter", "audio"),
    ('{"type":"session.input_audio.append","audio":1}', "invalid_type", "audio"),
    ('{"type":"session.commentary.append"}', "missing_required_parameter", "content"),
    ('{"type":"session.commentary.append","content":7}', "invalid_type", "content"),
    ('{"type":"session.commentary.append","content":"  "}', "invalid_value", "content"),
    ('{"type":"session.commentary.append","content":"' + "x" * 2001 + '"}', "string_above_max_length", "content"),
    ('{"type":"session.commentary.append","content":"hi","delegation_id":3}', "invalid_type", "delegation_id"),
    ('{"type":"session.commentary.append","content":"hi","delegation_id":"d"}', "invalid_value", "delegation_id"),
    ('{"type":"session.commentary.append","content":"hi","x":1}', "unknown_parameter", "x"),
])
def test_payload_errors_name_the_exact_param(message: str, code: str, param: str) -> None:
    assert _error(message)[:2] == (code, param)


@pytest.mark.parametrize("session", [
    {"model": "m", "delegation": None}, {"model": "m", "delegation": {"type": "client"}},
    {"model": "m", "delegation": {"type": "client", "acknowledgement_delay_ms": 200}},
    {"model": "m", "input": []}, {"model": "m", "triggers": []}, {"model": "m", "store": False},
    {"model": "m", "instructions": None}, {"model": "m", "audio": None},
    {"model": "m", "input": None}, {"model": "m", "safety_identifier": None},
])
def test_no_op_fields_are_accepted(session: dict[str, object]) -> None:
    assert isinstance(events.parse(_start(session, event_id="s")), events.SessionStart)


def test_the_sdks_startup_history_is_read_as_turns() -> None:
    """openai 3.57's `InitialItem` shapes, as LiveKit and Pipecat send them (type fields optional)."""
    out = events.parse(_start({"model": "m", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"role": "user", "id": "m1", "status": "completed", "content": [{"text": "Hi there"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]},
        {"role": "assistant", "status": "incomplete", "content": [{"type": "text", "text": "And"}]},
    ]}))
    assert isinstance(out, events.SessionStart)
    assert out.session.input == (events.Turn("developer", "Be brief."), events.Turn("user", "Hi there"),
                                 events.Turn("assistant", "Hello!"), events.Turn("assistant", "And"))


def test_responses_delegation_is_recorded_as_sent() -> None:
    config = {"model": "gpt-5", "instructions": None, "tools": [{"type": "web_search", "anything": 1}],
              "reasoning": {"effort": "low"}}
    out = events.parse(_start({"model": "m", "safety_identifier": "user-7",
                               "delegation": {"type": "responses", "responses": config}}))
    assert isinstance(out, events.SessionStart)
    assert out.session.delegation == events.ResponsesDelegation(config)
    assert out.session.safety_identifier == "user-7"


def test_commentary_is_parsed_with_a_null_delegation_id() -> None:
    out = events.parse('{"type":"session.commentary.append","content":"Hello","delegation_id":null,"event_id":"c"}')
    assert out == events.CommentaryAppend("Hello", "c")


def test_first_offending_field_in_client_order_wins() -> None:
    assert _error(_start({"model": "m", "zzz": 1, "store": 1}))[1] == "session.zzz"
    assert _error(_start({"store": 1, "zzz": 1, "model": "m"}))[1] == "session.store"


@pytest.mark.parametrize(("sent", "kept"), [(True, True), (False, False), (None, False)])
def test_store_is_read_as_the_sdk_types_it(sent: bool | None, kept: bool) -> None:
    """openai 3.63 `SessionConfig.store: bool` ("defaults to false"); whether a server honours
    `true` is `start.check_start`'s to say (test_errors.py, test_storage_e2e.py)."""
    out = events.parse(_start({"model": "m", "store": sent}))
    assert isinstance(out, events.SessionStart) and out.session.store is kept


def test_payload_errors_echo_the_event_id() -> None:
    assert _error(_start({"model": "m", "foo": 1}, event_id="e7"))[2] == "e7"
