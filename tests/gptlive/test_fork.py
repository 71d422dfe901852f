"""A fork's start (`gptlive.fork`) and a fork socket's `Connection`: the overrides openai 3.63 allows
on each transport, merged into the stored settings; everything else refused by name, in the
client's order; a refused fork start leaves the socket open for another."""

from __future__ import annotations

import orjson
import pytest

from liveplex.gptlive import connection as c
from liveplex.gptlive import errors, events, fork
from liveplex.live import contract
from tests.gptlive.test_connection import codes, new, sent

STORED = {"model": "gpt-live-1", "instructions": "Be brief.",
          "audio": {"format": {"type": "audio/pcm", "rate": 24000}, "output": {"voice": "NATF2"}},
          "delegation": {"type": "responses", "acknowledgement_delay_ms": 0}, "store": True,
          "wake_policy": {"type": "speech", "vad_threshold": 0.5}, "idle_timeout_s": 3}
SOCKET = fork.Source("sess_stored", STORED, webrtc=False)
WEBRTC = fork.Source("sess_stored", STORED, webrtc=True)


def _error(source: fork.Source, overrides: object) -> tuple[str, str | None]:
    with pytest.raises(errors.ProtocolError) as caught:
        fork.merged(source, overrides)
    return caught.value.code.value, errors.render_path(caught.value.param)


def test_an_empty_fork_inherits_every_stored_setting_a_socket_may_carry() -> None:
    assert fork.merged(WEBRTC, {}) == STORED
    assert fork.merged(SOCKET, {}) == {k: v for k, v in STORED.items() if k not in fork.MEDIA_ONLY}


def test_the_overrides_each_transport_allows_replace_only_what_they_name() -> None:
    pcmu = {"type": "audio/pcmu"}
    merged = fork.merged(SOCKET, {"audio": {"format": pcmu}, "store": False,
                                  "delegation": {"acknowledgement_delay_ms": 250}})
    assert merged["audio"] == {"format": pcmu, "output": {"voice": "NATF2"}}
    assert merged["store"] is False
    assert merged["delegation"] == {"type": "responses", "acknowledgement_delay_ms": 250}
    assert fork.merged(SOCKET, {"store": None})["store"] is True  # null: inherited
    assert fork.merged(WEBRTC, {"client": {"data_channel": {}}}) == STORED  # the call reads it, not the start


@pytest.mark.parametrize(("source", "overrides", "code", "param"), [
    (SOCKET, [], "invalid_type", "session"),
    (SOCKET, {"model": "gpt-live-1"}, "unsupported_parameter", "session.model"),
    (SOCKET, {"instructions": "x"}, "unknown_parameter", "session.instructions"),
    (SOCKET, {"client": {}}, "unsupported_parameter", "session.client"),
    (WEBRTC, {"audio": {"format": {"type": "audio/pcmu"}}}, "unsupported_parameter", "session.audio"),
    (SOCKET, {"audio": {"output": {}}}, "unknown_parameter", "session.audio.output"),
    (SOCKET, {"store": "yes"}, "invalid_type", "session.store"),
    (SOCKET, {"delegation": {"type": "client"}}, "invalid_value", "session.delegation.type"),
    (SOCKET, {"store": 1, "model": "x"}, "invalid_type", "session.store"),  # the client's order
])
def test_what_a_fork_may_not_change_is_refused_by_name(source: fork.Source, overrides: object, code: str,
                                                       param: str) -> None:
    assert _error(source, overrides) == (code, param)


def test_a_delegation_override_needs_a_stored_responses_delegation() -> None:
    plain = fork.Source("sess_stored", {"model": "gpt-live-1"}, webrtc=False)
    assert _error(plain, {"delegation": {"type": "responses"}}) == ("unsupported_parameter", "session.delegation")


def test_start_text_rewrites_only_a_session_start() -> None:
    append = '{"type":"session.input_audio.append","audio":""}'
    assert fork.start_text(SOCKET, append) == append
    assert fork.start_text(SOCKET, "not json") == "not json"
    assert fork.start_text(SOCKET, b"\x00") == b"\x00"
    text = fork.start_text(SOCKET, '{"type":"session.start","event_id":"e1","session":{"store":false}}')
    assert isinstance(text, str)
    assert orjson.loads(text) == {"type": "session.start", "event_id": "e1",
                                  "session": {**fork.merged(SOCKET, {}), "store": False}}
    missing = fork.start_text(SOCKET, '{"type":"session.start","event_id":"e2"}')
    assert isinstance(missing, events.Invalid) and missing.event_id == "e2"
    assert missing.error.code is errors.Code.MISSING_REQUIRED_PARAMETER


def test_a_fork_socket_starts_the_stored_session_as_a_new_one() -> None:
    conn = new()
    conn.fork_from(fork.Source("sess_stored", {"model": "gpt-live-1", "instructions": "Be brief."}, webrtc=False))
    refused = conn.receive('{"type":"session.start","event_id":"f0","session":{"model":"x"}}', 0, 1000.0)
    assert codes(refused) == ["unsupported_parameter"]
    assert [type(o) for o in conn.outcomes] == [c.Refused] and conn.state is c.State.IDLE
    conn.outcomes.clear()
    commands = conn.receive('{"type":"session.start","event_id":"f1","session":{}}', 0, 1000.0)
    assert [type(a) for a in commands] == [c.Start]
    start = commands[0]
    assert isinstance(start, c.Start)
    assert start.resource.instructions == "Be brief." and start.resource.id != "sess_stored"
    assert orjson.loads(start.text)["session"] == {"model": "gpt-live-1", "instructions": "Be brief."}
    started = sent(conn.deliver([contract.Started(frames=50)]))[0]  # resumed from the stored record
    assert started["type"] == "session.started"
    assert started["session"]["expires_at"] == start.resource.expires_at - 4  # 50 frames: 4 s spent
