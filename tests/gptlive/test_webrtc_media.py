"""A WebRTC call's audio path, stage by stage, without a peer connection: what each stage holds
back decides the round trip a caller hears (docs/webrtc.md, "The round trip")."""

from __future__ import annotations

import av
import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtp import RtpPacket

from liveplex.gptlive.server.webrtc import media, receive
from liveplex.live import frames
from tests.support import webrtc


def _packet(seq: int) -> RtpPacket:
    """Packet `seq` (its sequence number wraps; its payload says `seq`), depayloaded as aiortc's
    receiver leaves it."""
    payload = seq.to_bytes(4, "big", signed=True)
    packet = RtpPacket(payload_type=111, sequence_number=seq % 65536, timestamp=seq * 960 % 2**32, payload=payload)
    setattr(packet, "_data", payload)  # noqa: B010 (aiortc sets it so: not a declared attribute)
    return packet


def _decoded(buffer: receive.ReceiveBuffer, seqs: list[int]) -> list[int | None]:
    """What the decoder gets as each packet arrives (the packet's number, or None)."""
    out: list[int | None] = []
    for seq in seqs:
        _, frame = buffer.add(_packet(seq))
        out.append(None if frame is None else int.from_bytes(frame.data, "big", signed=True))
    return out


def test_each_audio_packet_is_decoded_as_it_arrives_where_aiortc_holds_four_behind_it() -> None:
    assert _decoded(receive.Prompt(), [10, 11, 12, 13, 14, 15]) == [10, 11, 12, 13, 14, 15]
    # aiortc's own buffer: nothing until the 5th packet, then always the one 4 behind (80 ms)
    assert _decoded(JitterBuffer(capacity=16, prefetch=4), [10, 11, 12, 13, 14, 15]) == [None] * 4 + [10, 11]


def test_a_gap_is_not_waited_for_and_a_packet_older_than_one_decoded_is_dropped() -> None:
    assert _decoded(receive.Prompt(), [1, 2, 4, 3, 5, 5, 6]) == [1, 2, 4, None, 5, None, 6]


def test_sequence_numbers_wrap_and_a_sender_that_starts_over_is_followed() -> None:
    assert _decoded(receive.Prompt(), [65534, 65535, 65536, 65537]) == [65534, 65535, 65536, 65537]
    assert _decoded(receive.Prompt(), [5000, 5001, 5002 - receive.RESTART_PACKETS, 7, 8]) == [5000, 5001, None, 7, 8]


async def test_install_replaces_each_audio_receivers_buffer() -> None:
    caller = webrtc.Caller()
    answerer = RTCPeerConnection()
    try:
        await answerer.setRemoteDescription(RTCSessionDescription(await caller.offer(), "offer"))
        receive.install(answerer, receive.Prompt)
        [receiver] = [t.receiver for t in answerer.getTransceivers() if t.kind == "audio"]
        assert type(getattr(receiver, receive.RECEIVER_BUFFER)) is receive.Prompt
    finally:
        await answerer.close()
        await caller.close()


PACKET_S = media.WIRE_SECONDS


def test_each_ticks_packets_are_due_from_its_own_arrival_twenty_ms_apart() -> None:
    outbox = media.Outbox()
    outbox.add([b"a0", b"a1", b"a2", b"a3"], 10.0)
    assert [outbox.take(10.0 + i * PACKET_S) for i in range(4)] == [
        (pytest.approx(10.0 + i * PACKET_S), f"a{i}".encode()) for i in range(4)]
    # the pod moved the session a tick group earlier: the next tick comes 60 ms after the last,
    # and leaves at once, not on a schedule kept from the first tick
    outbox.add([b"b0", b"b1", b"b2", b"b3"], 10.06)
    assert outbox.take(10.06) == (pytest.approx(10.06), b"b0")


def test_a_sender_that_fell_behind_keeps_the_newest_tick_and_two_ticks_at_most() -> None:
    outbox = media.Outbox()
    for tick in range(3):  # nothing read (ICE not complete): two ticks kept
        outbox.add([bytes([tick, i]) for i in range(4)], 1.0 + tick * 0.08)
    assert len(outbox) == media.PLAYOUT_MAX_PACKETS and outbox.dropped == 4
    due, first = outbox.take(5.0)  # read long after: the stale tick goes, the newest is sent
    assert first == bytes([2, 0]) and due == pytest.approx(1.16)
    assert len(outbox) == media.TICK_PACKETS - 1 and outbox.dropped == 8


def _tone(samples: int, channels: int = 1) -> bytes:
    return np.repeat((8000 * np.sin(np.arange(samples) / 7)).astype("<i2"), channels).tobytes()


def _decoded_packet(number: int = 0) -> av.AudioFrame:
    """What aiortc's Opus decoder gives for packet `number`: 20 ms, 48 kHz, stereo, its RTP time."""
    frame = av.AudioFrame(format="s16", layout="stereo", samples=media.WIRE_SAMPLES)
    frame.planes[0].update(_tone(media.WIRE_SAMPLES, 2))
    frame.sample_rate = media.WIRE_RATE
    frame.time_base = media.WIRE_TIME_BASE
    frame.pts = number * media.WIRE_SAMPLES
    return frame


def test_every_four_caller_packets_make_one_engine_frame_at_the_fourth() -> None:
    heard = media.Heard()
    done = [len(heard.feed(_decoded_packet(n))) for n in range(12)]
    assert done == [0, 0, 0, 1] * 3  # unaligned, swresample's delay made each frame wait for a fifth


def test_a_lost_packet_is_silence_in_its_place_and_the_frames_after_it_keep_their_time() -> None:
    heard = media.Heard()
    arrived = [0, 1, 3, 4, 5, 6, 7, 8 + 50, 8 + 51]  # 2 lost; then a 1 s pause (DTX): filled
    done = [len(heard.feed(_decoded_packet(n))) for n in arrived]
    assert done == [0, 0, 1, 0, 0, 0, 1, 12, 1]
    assert heard.feed(_decoded_packet(8 + 52 + 60)) == []  # 1.2 s on: a sender that started over, not filled
    assert heard.feed(_decoded_packet(0)) == []  # nor backwards


def test_every_engine_frame_makes_four_agent_packets_at_once() -> None:
    track = media.AgentTrack()
    try:
        counts: list[int] = []
        for _ in range(3):
            track.play(_tone(frames.FRAME_SAMPLES))
            counts.append(len(track.outbox))
            while track.outbox:
                track.outbox.take(0.0)
        assert counts == [media.TICK_PACKETS] * 3  # unaligned: 3, 4, 4, each frame's last 20 ms a tick late
    finally:
        track.stop()
