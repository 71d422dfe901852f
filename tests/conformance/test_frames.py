"""The checker's strict validator, fed hand-made good and bad server events."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.conformance import frames
from liveplex.conformance.frames import Rule

SESSION = {
    "id": "sess_9c1e4b7a20f34d6e",
    "status": "active",
    "expires_at": 1767225840,
    "model": "gpt-live-1",
    "instructions": "You echo the caller.",
    "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "marin"}},
    "store": False,
}
STARTED = {"type": "session.started", "event_id": "event_1", "session": SESSION, "client_event_id": "s1"}
DELTA = {"type": "session.output_audio.delta", "delta": "AAAA"}
TRANSCRIPT = {"type": "session.output_transcript.delta", "event_id": "event_2", "delta": "I",
              "start_ms": 480, "end_ms": 560}
USAGE = {"type": "session.usage.updated", "event_id": "event_3", "usage": {"seconds": 4.96}}
MUTED = {"type": "session.input_audio.muted", "event_id": "event_4", "client_event_id": "m1"}
ERROR = {"type": "error", "event_id": "event_5", "client_event_id": "a1",
         "error": {"type": "invalid_request_error", "code": "session_already_started",
                   "message": "Session already started.", "param": "type", "client_event_id": "a1"}}
CLOSED = {"type": "session.closed", "event_id": "event_6", "reason": "close_requested",
          "session": SESSION, "usage": {"seconds": 5.04}, "client_event_id": "c1"}
SESSION_LIFE = [STARTED, DELTA, TRANSCRIPT, USAGE, MUTED, ERROR, CLOSED]


def problems_of(*events: object) -> list[tuple[Rule, ...]]:
    """The rules broken by each event, fed in order to one validator."""
    validator = frames.FrameValidator()
    out = []
    for event in events:
        text = event if isinstance(event, (str, bytes)) else json.dumps(event)
        out.append(tuple(p.rule for p in validator.check(text).problems))
    return out


def last_rules(*events: object) -> set[Rule]:
    return set(problems_of(*events)[-1])


def test_a_whole_session_of_good_events_passes():
    assert problems_of(*SESSION_LIFE) == [()] * len(SESSION_LIFE)


def test_an_error_before_start_with_a_null_param_passes():
    error = {"type": "error", "event_id": "e", "error": {
        "type": "server_error", "code": "server_busy", "message": "busy", "param": None}}
    assert problems_of(error) == [()]


@pytest.mark.parametrize("path", [
    ("foo",),
    ("session", "foo"),
    ("session", "audio", "foo"),
    ("session", "audio", "format", "foo"),
    ("session", "audio", "output", "speed"),
])
def test_an_extra_field_at_any_level_is_rejected(path):
    event = copy.deepcopy(STARTED)
    node = event
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = 1
    assert Rule.SCHEMA in last_rules(event)


def test_an_extra_field_in_a_custom_voice_is_rejected():
    event = copy.deepcopy(STARTED)
    event["session"]["audio"]["output"]["voice"] = {"id": "x", "extra": 1}
    verdict = frames.FrameValidator().check(json.dumps(event))
    assert [(p.rule, p.path) for p in verdict.problems] == [(Rule.SCHEMA, "session.audio.output.voice")]


@pytest.mark.parametrize("event, missing", [
    (STARTED, "session"), (TRANSCRIPT, "start_ms"), (USAGE, "usage"), (CLOSED, "reason"), (ERROR, "error"),
])
def test_a_missing_required_field_is_rejected(event, missing):
    event = {k: v for k, v in event.items() if k != missing}
    prefix = [STARTED] if event["type"] != "session.started" else []
    assert Rule.SCHEMA in last_rules(*prefix, event)


@pytest.mark.parametrize("path, value", [
    (("session", "status"), "expired"),
    (("session", "audio", "format", "rate"), 44100),
    (("session", "audio", "format", "type"), "audio/wav"),
    (("session", "expires_at"), 1767225840.0),
    (("session", "expires_at"), "1767225840"),
    (("session", "store"), 0),
])
def test_a_wrong_literal_or_json_type_is_rejected(path, value):
    event = copy.deepcopy(STARTED)
    node = event
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    verdict = frames.FrameValidator().check(json.dumps(event))
    # A wrong discriminator (`format.type`) is reported at the union, one level up.
    assert [p.rule for p in verdict.problems] == [Rule.SCHEMA]
    assert ".".join(path).startswith(verdict.problems[0].path)


def test_a_closed_reason_outside_the_sdk_enum_is_rejected():
    assert Rule.SCHEMA in last_rules(STARTED, {**CLOSED, "reason": "bye"})


def test_type_not_first_is_rejected():
    event = {"event_id": "e", **{k: v for k, v in MUTED.items() if k != "event_id"}}
    assert last_rules(STARTED, event) == {Rule.TYPE_NOT_FIRST}


def test_a_duplicate_event_id_is_rejected():
    assert problems_of(STARTED, MUTED, {**MUTED, "client_event_id": "m2"})[-1] == (Rule.DUPLICATE_EVENT_ID,)


def test_event_ids_need_only_be_unique_per_socket():
    assert problems_of(STARTED, MUTED) == [(), ()]
    assert problems_of(STARTED, MUTED) == [(), ()]


@pytest.mark.parametrize("event_id", ["", "e" * 257])
def test_an_empty_or_overlong_event_id_is_rejected(event_id):
    assert Rule.EVENT_ID in last_rules({**STARTED, "event_id": event_id})


@pytest.mark.parametrize("extra", [{"event_id": "e"}, {"start_ms": 0, "end_ms": 80}])
def test_an_audio_delta_with_any_other_field_is_rejected(extra):
    assert Rule.AUDIO_FIELDS in last_rules(STARTED, {**DELTA, **extra})


@pytest.mark.parametrize("frame, rule", [
    ("not json", Rule.NOT_JSON),
    ("[1, 2]", Rule.NOT_OBJECT),
    ('{"type": "error", "type": "error"}', Rule.DUPLICATE_KEY),
    (b'{"type": "session.output_audio.delta", "delta": ""}', Rule.BINARY_FRAME),
    ('{"delta": "AAAA"}', Rule.MISSING_TYPE),
    ('{"type": 5}', Rule.MISSING_TYPE),
    ('{"type": "session.created", "event_id": "e"}', Rule.UNKNOWN_TYPE),
])
def test_bad_framing_is_rejected(frame, rule):
    assert rule in last_rules(STARTED, frame)


@pytest.mark.parametrize("type_", sorted(frames.NEVER_EMITTED))
def test_events_liveplex_never_emits_are_rejected(type_):
    assert Rule.NEVER_EMITTED in last_rules(STARTED, {"type": type_})


@pytest.mark.parametrize("reason", sorted(frames.NEVER_REASONS))
def test_closed_reasons_liveplex_never_uses_are_rejected(reason):
    assert last_rules(STARTED, {**CLOSED, "reason": reason}) == {Rule.NEVER_EMITTED}


def test_null_outside_error_param_is_rejected():
    verdict = frames.FrameValidator().check(json.dumps({**STARTED, "client_event_id": None}))
    assert [(p.rule, p.path) for p in verdict.problems] == [(Rule.NULL_VALUE, "client_event_id")]


def test_an_error_without_param_is_rejected():
    error = copy.deepcopy(ERROR)
    del error["error"]["param"]
    assert last_rules(error) == {Rule.ERROR_SHAPE}


@pytest.mark.parametrize("outer, inner", [("a1", None), (None, "a1"), ("a1", "a2")])
def test_an_error_must_echo_both_client_event_ids_or_neither(outer, inner):
    error = copy.deepcopy(ERROR)
    for node, value in ((error, outer), (error["error"], inner)):
        node.pop("client_event_id")
        if value is not None:
            node["client_event_id"] = value
    assert last_rules(error) == {Rule.ERROR_SHAPE}


@pytest.mark.parametrize("event", [DELTA, TRANSCRIPT, USAGE, MUTED, CLOSED])
def test_session_events_before_started_are_rejected(event):
    assert problems_of(event) == [(Rule.ORDER,)]


def test_anything_after_closed_is_rejected():
    assert problems_of(STARTED, CLOSED, DELTA)[-1] == (Rule.ORDER,)


def test_a_second_started_is_rejected():
    assert problems_of(STARTED, {**STARTED, "event_id": "event_9"})[-1] == (Rule.ORDER,)


def _objects(node: object, path: tuple = ()) -> list[tuple]:
    """Paths of every JSON object inside an event, the root included."""
    if isinstance(node, dict):
        return [path] + [p for k, v in node.items() for p in _objects(v, (*path, k))]
    return []


@given(st.sampled_from(SESSION_LIFE).flatmap(
    lambda event: st.tuples(st.just(event), st.sampled_from(_objects(event)),
                            st.text(min_size=1).filter(lambda k: k not in ("type", "param")))))
def test_any_undeclared_key_anywhere_is_rejected(case):
    event, path, key = case
    event = copy.deepcopy(event)
    node = event
    for part in path:
        node = node[part]
    if key in node:
        return
    node[key] = 0
    prefix = [STARTED] if event["type"] != "session.started" else []
    assert last_rules(*prefix, event) & {Rule.SCHEMA, Rule.AUDIO_FIELDS}


@given(st.sampled_from(SESSION_LIFE), st.randoms())
def test_type_anywhere_but_first_is_rejected(event, random):
    keys = list(event)
    random.shuffle(keys)
    if keys[0] == "type":
        keys.append(keys.pop(0))
    shuffled = {k: event[k] for k in keys}
    prefix = [STARTED] if event["type"] != "session.started" else []
    assert Rule.TYPE_NOT_FIRST in last_rules(*prefix, shuffled)


def test_dotted_renders_param_paths():
    assert frames.dotted(("session", "input", 0, "content")) == "session.input[0].content"
    assert frames.dotted(()) == ""
