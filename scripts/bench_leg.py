"""The gateway leg's per-frame CPU with no-op sockets (docs/gateway.md, "Inside the relay").

What one relayed sim session costs the gateway's own code each 80 ms tick, without the sockets:
the pod's audio delta and checkpoint through `Relaying.upstream_message` to the client's peer, and
four 20 ms client chunks through `Relaying.client_frame` to the pod. The thread's CPU clock (not
the wall clock: a shared machine descheduling us says nothing of the code) over `--frames` frame
pairs, the best of `--rounds`. Compare two checkouts by running each in turn, several times
(`PYTHONPATH=OTHER_CHECKOUT .venv/bin/python scripts/bench_leg.py`). JSON on stdout.

    .venv/bin/python scripts/bench_leg.py [--frames 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from liveplex.gateway import leg, relaying
from liveplex.gateway.stats import GatewayStats
from liveplex.gptlive import events
from liveplex.gptlive.server import hop
from liveplex.placement import Placed

DELTA = events.AUDIO_DELTA_PREFIX + "A" * 5120 + '","response_id":"r","item_id":"i"}'
"""A 24 kHz 80 ms delta's size in base64, written as liveplex pods write it (`type` first)."""
CHECKPOINT = hop.checkpoint_event(bytes(240))
"""About a sim tick's checkpoint (57 KB over a 4-minute call, docs/continuity.md)."""
CHUNK = '{"type":"session.input_audio.append","audio":"' + "A" * 1280 + '"}'
"""A 20 ms 24 kHz chunk."""


class NoSocket:
    """The pod's socket and the client's peer, doing nothing."""

    write_buffer_bytes = 0
    received = 0
    sent = 0

    def send(self, data: str | bytes) -> None:
        pass

    def send_verbatim(self, text: str, frame: bool) -> None:
        pass


class Start:
    """What the leg reads of a start: the session's id (and the text it would forward)."""

    resource = type("Resource", (), {"id": "sess_bench", "model": "m"})()
    text = "{}"


async def run(frames: int, rounds: int) -> float:
    """The best round's thread CPU per frame pair, ns."""
    shared = leg.Shared(None, None, GatewayStats(), asyncio.Semaphore(1))  # the hot paths reach no placer or link
    sessions = leg.UpstreamLeg(shared, Start, NoSocket(), "bench/pool", lambda _: None)
    sessions._task.cancel()  # no placement: the session is handed its machine and socket directly
    machine = sessions._machine = relaying.Relaying(Placed("pod-a", "127.0.0.1:1"))
    sessions._up = NoSocket()
    message, forward = sessions._message, sessions.forward
    best = float("inf")
    for _ in range(rounds):
        began = time.thread_time_ns()
        for i in range(frames):
            message(DELTA)
            message(CHECKPOINT)
            forward(CHUNK)
            forward(CHUNK)
            forward(CHUNK)
            forward(CHUNK)
            if i % 1000 == 0:  # a record stays within its bound, as a call's does
                machine._record = bytearray()
        best = min(best, (time.thread_time_ns() - began) / frames)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000, help="frame pairs a round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, the best kept (default: %(default)s)")
    args = parser.parse_args()
    if args.frames < 1 or args.rounds < 1:
        parser.error("--frames and --rounds must be at least 1")
    print(json.dumps({"ns_per_frame_pair": round(asyncio.run(run(args.frames, args.rounds))),
                      "frames": args.frames, "rounds": args.rounds}))


if __name__ == "__main__":
    main()
