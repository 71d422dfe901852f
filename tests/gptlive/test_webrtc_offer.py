"""The WebRTC create's body and the data channel's screen, driven directly (pure)."""

from __future__ import annotations

import orjson
import pytest

from liveplex.gptlive.errors import ProtocolError
from liveplex.gptlive.server.webrtc import channel, offer

SDP = "\r\n".join([
    "v=0", "o=- 1 1 IN IP4 0.0.0.0", "s=-", "t=0 0",
    "m=audio 9 UDP/TLS/RTP/SAVPF 96 0", "a=rtpmap:96 opus/48000/2", "a=rtpmap:0 PCMU/8000",
    "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "a=sctp-port:5000", ""])


def _body(session: object = None, transport: object = None, **extra: object) -> bytes:
    return orjson.dumps({"session": {"model": "gpt-live-1"} if session is None else session,
                         "transport": {"type": "webrtc", "sdp": SDP} if transport is None else transport, **extra})


def test_the_session_becomes_a_start_less_what_only_webrtc_has() -> None:
    read = offer.read(_body({"model": "m", "client": {"data_channel": {
        "allowed_client_events": ["session.close"], "allowed_server_events": "all"}},
        "audio": {"output": {"voice": "marin"}}, "instructions": "hi",
        "wake_policy": {"type": "speech"}, "idle_timeout_s": 3}))
    assert orjson.loads(read.start_text) == {"type": "session.start", "session": {  # the wake: the start's
        "model": "m", "audio": {"output": {"voice": "marin"}}, "instructions": "hi",
        "wake_policy": {"type": "speech"}, "idle_timeout_s": 3}}
    assert read.sdp == SDP
    assert read.policy == offer.Policy(frozenset({"session.close"}), None)
    assert read.policy.takes("session.close") and not read.policy.takes("session.input_audio.mute")
    assert read.policy.sends("anything")


@pytest.mark.parametrize(("body", "code", "param"), [
    (b"[]", "invalid_json", None),
    (b"{", "invalid_json", None),
    (_body(extra=1), "unknown_parameter", "extra"),
    (orjson.dumps({"session": {"model": "m"}}), "missing_required_parameter", "transport"),
    (_body(transport={"type": "websocket", "sdp": SDP}), "unsupported_value", "transport.type"),
    (_body(transport={"type": "webrtc"}), "missing_required_parameter", "transport.sdp"),
    (_body(transport={"type": "webrtc", "sdp": 5}), "invalid_type", "transport.sdp"),
    (_body(transport={"type": "webrtc", "sdp": "v=0\r\n" + "a" * offer.MAX_SDP_CHARS}),
     "string_above_max_length", "transport.sdp"),
    (_body({"model": "m", "audio": {"output": {"format": {}}}}), "unknown_parameter", "session.audio.output.format"),
    (_body({"model": "m", "client": {"x": 1}}), "unknown_parameter", "session.client.x"),
    (_body({"model": "m", "client": {"data_channel": {"allowed_client_events": ["session.nope"]}}}),
     "invalid_value", "session.client.data_channel.allowed_client_events[0]"),
    (_body({"model": "m", "client": {"data_channel": {"allowed_server_events": "some"}}}),
     "invalid_value", "session.client.data_channel.allowed_server_events"),
    (_body({"model": "m", "client": {"data_channel": {"allowed_server_events": [1]}}}),
     "invalid_type", "session.client.data_channel.allowed_server_events[0]"),
])
def test_bad_bodies_name_the_parameter(body: bytes, code: str, param: str | None) -> None:
    with pytest.raises(ProtocolError) as refused:
        offer.read(body)
    assert (refused.value.code.value, refused.value.param_text) == (code, param)


@pytest.mark.parametrize(("sdp", "why"), [
    ("hello", "begin with 'v=0'"),
    (SDP.replace("m=audio", "m=video"), "no audio section"),
    (SDP.replace("opus/48000", "opus/16000"), "opus/48000"),
    (SDP.replace("m=application", "m=text"), "no data channel"),
])
def test_offers_this_server_cannot_answer(sdp: str, why: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        offer.check_sdp(sdp)
    assert why in refused.value.message and refused.value.param_text == "transport.sdp"


def test_a_response_selector_is_accepted_and_selects_nothing() -> None:
    read = offer.read(_body({"model": "m", "client": {"data_channel": {"allowed_server_events": [
        "error", {"type": "response.event", "response_event": "response.created"}]}}}))
    assert read.policy.server == frozenset({"error"})


@pytest.mark.parametrize(("message", "refused"), [
    ('{"type":"session.start","event_id":"s","session":{}}', ("unsupported_event", "s")),
    ('{"type":"session.input_audio.append","audio":"AAAA"}', ("unsupported_event", None)),
    ('{"type":"session.input_audio.mute","event_id":"m"}', ("unsupported_event", "m")),
    ('{"type":"session.close"}', None),
    ('{"type":"session.update"}', None),  # the machine refuses it, as on a socket
    ("not json", None),
    (b"\x00", None),
    ('{"type":"session.start","event_id":5}', None),  # the machine names the bad event_id
])
def test_the_channel_screens_only_what_webrtc_changes(message: str | bytes, refused: tuple | None) -> None:
    policy = offer.Policy(client=frozenset({"session.close", "session.update", "session.start"}))
    got = channel.screen(message, policy)
    assert (None if got is None else (got[0].code.value, got[1])) == refused


def test_the_answer_asks_the_caller_for_opus_in_band_fec() -> None:
    answer = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96 0\r\na=rtpmap:96 opus/48000/2\r\na=rtpmap:0 PCMU/8000\r\n"
    assert offer.ask_fec(answer) == ("v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 96 0\r\na=rtpmap:96 opus/48000/2\r\n"
                                     "a=fmtp:96 useinbandfec=1\r\na=rtpmap:0 PCMU/8000\r\n")
    fmtp = "v=0\nm=audio 9 x 111\na=rtpmap:111 OPUS/48000/2\na=fmtp:111 minptime=10\na=fmtp:0 x=1\n"
    assert offer.ask_fec(fmtp) == fmtp.replace("minptime=10", "minptime=10;useinbandfec=1")
    assert offer.ask_fec(offer.ask_fec(answer)) == offer.ask_fec(answer)
