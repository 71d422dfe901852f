"""The caller's Opus decode, per packet: libopus through ctypes against PyAV's (docs/webrtc.md).

Thread CPU clock per packet, best of `--rounds` rounds of `--packets` packets (`tone.voice`,
20 ms packets with in-band FEC, as Chrome sends it: `tone.opus_packets`):

- `pyav_decode_us`: aiortc's `OpusDecoder` (PyAV, 48 kHz stereo): what its decoder thread did;
- `pyav_decode_resample_us`: that and swresample to 24 kHz mono (the loop's part before);
- `libopus_decode_us`: `opus.Decoder` at 24 kHz mono (ctypes): the decode alone;
- `heard_us`: `media.Heard.packet`: the decode thread's whole part now (duration, timeline, decode,
  80 ms frames);
- `plc_us`, `fec_us`: concealing one lost 20 ms packet (PLC; FEC from the next packet);
- `handoff_loop_us`: the event loop's part of `receive.Prompt` (the hand-off to the decode thread
  and the frames back), measured on the loop's thread.

    .venv/bin/python scripts/bench_opus_decode.py [--packets 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import time
from collections.abc import Callable

import av
from aiortc.codecs.opus import OpusDecoder
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtp import RtpPacket

from liveplex.bench import tone
from liveplex.gptlive.server.webrtc import media, opus, receive
from liveplex.live import frames

PACKET_TICKS = 960


def per_packet_us(run: Callable[[], int], rounds: int) -> float:
    """Best of `rounds` of `run` (which returns how many packets it did), thread CPU per packet."""
    best = float("inf")
    for _ in range(rounds):
        began = time.thread_time_ns()
        done = run()
        best = min(best, (time.thread_time_ns() - began) / done / 1000)
    return round(best, 2)


def pyav(stream: list[bytes], resample: bool) -> Callable[[], int]:
    def run() -> int:
        decoder = OpusDecoder()
        resampler = media.Resampler(frames.SAMPLE_RATE)  # the old `Heard`'s: 48 kHz stereo -> 24 kHz mono
        for n, packet in enumerate(stream):
            for frame in decoder.decode(JitterFrame(packet, n * PACKET_TICKS)):
                if resample and isinstance(frame, av.AudioFrame):
                    resampler.pcm(frame)
        return len(stream)

    return run


def libopus(stream: list[bytes]) -> Callable[[], int]:
    def run() -> int:
        decoder = opus.Decoder(frames.SAMPLE_RATE)
        for packet in stream:
            decoder.decode(packet)
        return len(stream)

    return run


def heard(stream: list[bytes]) -> Callable[[], int]:
    def run() -> int:
        listener = media.Heard()
        for n, packet in enumerate(stream):
            listener.packet(packet, n, n * PACKET_TICKS)
        return len(stream)

    return run


def concealed(stream: list[bytes], fec: bool) -> Callable[[], int]:
    """Every other packet lost: the time of one concealment and one decode, less a decode."""
    samples = frames.SAMPLE_RATE // 50

    def run() -> int:
        decoder = opus.Decoder(frames.SAMPLE_RATE)
        for n in range(1, len(stream), 2):
            decoder.conceal(samples, stream[n] if fec else None)
            decoder.decode(stream[n])
        return len(stream) // 2

    return run


async def handoff(stream: list[bytes], rounds: int) -> float:
    """The loop thread's CPU per packet with `receive.Prompt` (the decode itself on its thread)."""
    best = float("inf")
    rtp = [RtpPacket(payload_type=111, sequence_number=n % 65536, timestamp=n * PACKET_TICKS, payload=packet)
           for n, packet in enumerate(stream)]
    for _ in range(rounds):
        prompt = receive.Prompt(media.Heard().packet)
        began = time.thread_time_ns()
        for packet in rtp:
            prompt.add(packet)
        for _ in range(len(stream) // 4):
            await prompt.frames.get()
        best = min(best, (time.thread_time_ns() - began) / len(stream) / 1000)
    return round(best, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packets", type=int, default=2000, help="packets a round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the best kept (default: %(default)s)")
    args = parser.parse_args()
    stream = tone.opus_packets(tone.voice(args.packets * tone.PACKET_S))
    lib = opus.library()
    lib.opus_get_version_string.restype = ctypes.c_char_p
    report = {
        "packets": len(stream), "rounds": args.rounds, "libopus": lib.opus_get_version_string().decode(),
        "pyav_decode_us": per_packet_us(pyav(stream, resample=False), args.rounds),
        "pyav_decode_resample_us": per_packet_us(pyav(stream, resample=True), args.rounds),
        "libopus_decode_us": per_packet_us(libopus(stream), args.rounds),
        "heard_us": per_packet_us(heard(stream), args.rounds),
        "plc_us": round(per_packet_us(concealed(stream, fec=False), args.rounds)
                        - per_packet_us(libopus(stream), args.rounds), 2),
        "fec_us": round(per_packet_us(concealed(stream, fec=True), args.rounds)
                        - per_packet_us(libopus(stream), args.rounds), 2),
        "handoff_loop_us": asyncio.run(handoff(stream, args.rounds)),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
