"""A WebRTC call's audio path, stage by stage, without a peer connection: what each stage holds
back decides the round trip a caller hears (docs/webrtc.md, "The round trip")."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.rtp import RtpPacket

from liveplex.bench import tone
from liveplex.gptlive.server.webrtc import media, receive, timeline
from liveplex.live import frames
from tests.support import webrtc

TICKS = 960
"""One 20 ms packet in RTP ticks."""
MS = timeline.TICKS_PER_S // 1000


def _placed(packets: list[tuple[int, int]], ticks: int = TICKS) -> list[timeline.Fill | None]:
    """What fills the gap before each (sequence number, timestamp) packet, `ticks` long each."""
    line = timeline.Timeline()
    return [line.place(seq % 65536, ts % 2**32, ticks) for seq, ts in packets]


def _in_order(numbers: list[int]) -> list[tuple[int, int]]:
    """Packets by number: sequence number and timestamp as a steady 20 ms sender gives them."""
    return [(n, n * TICKS) for n in numbers]


NONE = timeline.NOTHING


def test_each_packet_in_order_is_played_as_it_comes_and_a_late_one_is_dropped() -> None:
    assert _placed(_in_order([10, 11, 12, 13])) == [NONE] * 4
    # 3 came after 4 (its moment passed), 5 twice: dropped; 3's loss was concealed before 4
    assert _placed(_in_order([1, 2, 4, 3, 5, 5, 6])) == [
        NONE, NONE, timeline.Fill(conceal=TICKS), None, NONE, None, NONE]


def test_sequence_numbers_and_timestamps_wrap_and_a_sender_that_starts_over_is_followed() -> None:
    wrapping = [(65534, 2**32 - 960), (65535, 0), (65536, 960), (65537, 1920)]
    assert _placed(wrapping) == [NONE] * 4
    restart = _in_order([5000, 5001]) + [(5002 - timeline.RESTART_PACKETS, 5002 * TICKS), (7, 9000)]
    assert _placed(restart) == [NONE, NONE, None, NONE]  # 100 behind: late; further: a new stream, as it is


def test_lost_packets_are_concealed_up_to_the_bound_then_silence() -> None:
    most = int(timeline.MAX_CONCEAL_S * 1000) // 20  # packets
    assert _placed(_in_order([0, 1 + most])) == [NONE, timeline.Fill(conceal=most * TICKS)]
    assert _placed(_in_order([0, 2 + most])) == [NONE, timeline.Fill(silence=(most + 1) * TICKS)]
    # a loss whose gap is not whole 2.5 ms steps (a sender's odd timestamps): the rest is silence
    assert _placed([(0, 0), (2, 2 * TICKS + 7)]) == [NONE, timeline.Fill(conceal=TICKS, silence=7)]


def test_a_pause_without_a_loss_is_silence_and_a_jump_past_a_second_or_back_is_not_filled() -> None:
    dtx = [(0, 0), (1, 25 * TICKS), (2, 26 * TICKS)]  # Opus DTX: 480 ms unsent, no sequence gap
    assert _placed(dtx) == [NONE, timeline.Fill(silence=24 * TICKS), NONE]
    assert _placed([(0, 0), (1, TICKS + 1000 * MS + 1)]) == [NONE, NONE]
    assert _placed([(0, 5 * TICKS), (1, 0)]) == [NONE, NONE]
    assert _placed([(0, 0), (3, TICKS + 1000 * MS)]) == [NONE, timeline.Fill(silence=1000 * MS)]


async def test_install_replaces_each_audio_receivers_buffer() -> None:
    caller = webrtc.Caller()
    answerer = RTCPeerConnection()
    try:
        await answerer.setRemoteDescription(RTCSessionDescription(await caller.offer(), "offer"))
        [prompt] = receive.install(answerer, lambda: receive.Prompt(media.Heard().packet))
        [receiver] = [t.receiver for t in answerer.getTransceivers() if t.kind == "audio"]
        assert getattr(receiver, receive.RECEIVER_BUFFER) is prompt
    finally:
        await answerer.close()
        await caller.close()


def _rtp(seq: int, payload: bytes) -> RtpPacket:
    return RtpPacket(payload_type=111, sequence_number=seq, timestamp=seq * TICKS, payload=payload)


async def _frames(prompt: receive.Prompt, count: int) -> list[bytes | None]:
    async with asyncio.timeout(5):
        return [await prompt.frames.get() for _ in range(count)]


async def test_each_packet_is_decoded_off_the_loop_as_it_arrives_and_the_frames_come_back_in_order() -> None:
    heard = media.Heard()
    prompt = receive.Prompt(heard.packet)
    packets = tone.opus_packets(tone.voice(0.4))
    # aiortc's decoder is handed nothing
    assert all(prompt.add(_rtp(n, packet)) == (False, None) for n, packet in enumerate(packets))
    got = await _frames(prompt, 5)
    lossless = media.Heard()
    assert got == [frame for n, packet in enumerate(packets) for frame in lossless.packet(packet, n, n * TICKS)]
    prompt.close()
    prompt.add(_rtp(len(packets), packets[0]))
    await asyncio.sleep(0.1)
    assert prompt.frames.empty()


async def test_a_decoder_that_fails_ends_the_callers_audio() -> None:
    def broken(payload: bytes, seq: int, ts: int) -> list[bytes]:
        raise ZeroDivisionError

    prompt = receive.Prompt(broken)
    prompt.add(_rtp(0, b"x"))
    assert await _frames(prompt, 1) == [None]
    assert prompt.closed


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


def _tone(samples: int) -> bytes:
    return (8000 * np.sin(np.arange(samples) / 7)).astype("<i2").tobytes()


VOICE = tone.opus_packets(tone.voice(1.0))  # 50 packets


def _heard(numbers: list[int], packets: list[bytes] = VOICE) -> tuple[list[int], np.ndarray]:
    """Packets by number (a steady sender's times) through one `Heard`: the frames each
    completed, and all the audio heard (24 kHz)."""
    heard = media.Heard()
    done = [heard.packet(packets[n], n, n * TICKS) for n in numbers]
    pcm = b"".join(frame for frames_ in done for frame in frames_)
    return [len(frames_) for frames_ in done], np.frombuffer(pcm, np.int16).astype(np.float64)


PACKET_24K = frames.SAMPLE_RATE // 50


def test_every_four_caller_packets_make_one_engine_frame_at_the_fourth() -> None:
    counts, _ = _heard(list(range(12)))
    assert counts == [0, 0, 0, 1] * 3  # no resampler: its delay made each frame wait for a fifth


def test_a_lost_packet_is_concealed_in_its_place_and_the_frames_after_it_keep_their_time() -> None:
    _, lossless = _heard(list(range(48)))
    lost = next(n for n in range(20, 40) if webrtc.has_fec(VOICE[n + 1]))
    counts, got = _heard([n for n in range(48) if n != lost])
    assert sum(counts) == 12 and len(got) == len(lossless)
    at = slice(lost * PACKET_24K, (lost + 1) * PACKET_24K)
    # before: 20 ms of zeros here; now the caller's own audio, from the next packet's FEC
    assert np.sqrt(((got[at] - lossless[at]) ** 2).mean() / (lossless[at] ** 2).mean()) < 0.1
    five_ms = got[PACKET_24K: len(got) // 120 * 120].reshape(-1, 120)  # after the decoder's first (its lead-in)
    assert np.sqrt((five_ms ** 2).mean(axis=1)).min() > 0.2 * np.sqrt((lossless ** 2).mean())  # no hole


def test_a_loss_past_the_bound_is_silence_and_the_caller_is_heard_again_after_it() -> None:
    most = int(timeline.MAX_CONCEAL_S * 1000) // 20
    lost = set(range(20, 21 + most))  # one packet past what Opus conceals
    counts, got = _heard([n for n in range(48) if n not in lost])
    _, lossless = _heard(list(range(48)))
    assert sum(counts) == 12 and len(got) == len(lossless)
    assert not got[20 * PACKET_24K:(21 + most) * PACKET_24K].any()  # silence, as before, in its place
    after = slice((22 + most) * PACKET_24K, (24 + most) * PACKET_24K)
    assert np.sqrt((got[after] ** 2).mean()) > 0.5 * np.sqrt((lossless[after] ** 2).mean())


def test_a_pause_is_silence_and_a_packet_libopus_cannot_read_is_concealed_as_lost() -> None:
    heard = media.Heard()
    done = [heard.packet(VOICE[n], n, n * TICKS) for n in range(3)]
    done.append(heard.packet(VOICE[3], 3, 3 * TICKS + 480 * MS))  # 480 ms unsent (DTX): 6 frames
    assert [len(d) for d in done] == [0, 0, 0, 7]
    assert not b"".join(done[3][1:6]).strip(b"\0")  # the pause, silent
    assert heard.packet(bytes([0x03]), 4, 4 * TICKS + 480 * MS) == [] and heard.unreadable == 1
    rest = [heard.packet(VOICE[n], n, n * TICKS + 480 * MS) for n in range(5, 12)]
    assert sum(map(len, rest)) == 2  # packet 4's 20 ms concealed: the frames keep their time


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
