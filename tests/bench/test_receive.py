"""The bench's WebRTC callers hold no packet behind the next (`bench.receive`): aiortc's fixed
4-packet prefetch would add 80 ms to every round trip the bench reports, which a browser's
adaptive receiver does not. Fails loudly if aiortc moves its buffer."""

from __future__ import annotations

from aiortc import RTCPeerConnection, RTCSessionDescription

from liveplex.bench import receive
from liveplex.gptlive.server.webrtc import receive as rtc_receive
from tests.support import webrtc


async def test_a_bench_callers_audio_receiver_holds_no_packet_behind_the_next() -> None:
    caller = webrtc.Caller()
    answerer = RTCPeerConnection()
    try:
        await answerer.setRemoteDescription(RTCSessionDescription(await caller.offer(), "offer"))
        [receiver] = [t.receiver for t in answerer.getTransceivers() if t.kind == "audio"]
        assert getattr(receiver, rtc_receive.RECEIVER_BUFFER)._prefetch == 4  # aiortc's own
        receive.tune_receiver(answerer)
        assert getattr(receiver, rtc_receive.RECEIVER_BUFFER)._prefetch == receive.RECEIVE_PREFETCH == 0
    finally:
        await answerer.close()
        await caller.close()
