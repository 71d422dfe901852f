"""An in-process uvicorn pod on a free loopback port, over the sim or a hand-played engine."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable

import uvicorn

from liveplex.gptlive import native
from liveplex.gptlive.app import create_app
from liveplex.gptlive.settings import Settings
from liveplex.live import channel, contract
from liveplex.live.drive import Ticker
from liveplex.live.jitter import Jitter
from liveplex.live.line import Line
from liveplex.live.runner import EngineThread
from liveplex.sim_pod.engine import SimEngine
from liveplex.sim_pod.profile import SimProfile

WS_IMPL = native.LiveProtocol


class Stubborn:
    """A hand-played engine: starts sessions and says silence, but never answers a hangup,
    and says `pcm` instead of a frame when told to (to make the front end trip)."""

    def __init__(self, pcm: bytes = bytes(3840)) -> None:
        self.lines: list[Line] = []
        self.hung_up: list[bool] = []
        self.pcm = pcm

    def sessions(self) -> int:
        return len(self.lines)

    def take(self, sub: channel.LiveSubmission) -> None:
        line = Line.start(sub, Jitter(1920, 2, 4), 10_000)
        if line is not None:
            self.lines.append(line)

    def tick(self, skipped: int) -> None:
        for line in self.lines:
            line.listen()
            line.say(self.pcm, None)
        self.hung_up = [line.input.closed for line in self.lines]

    def abort(self) -> None:
        for line in self.lines:
            line.close(contract.CloseReason.ABORTED)
        self.lines = []


@contextlib.asynccontextmanager
async def serve(profile: SimProfile = SimProfile(), settings: Settings = Settings(),
                engine: Callable[[contract.LiveInfo], Ticker] | None = None,
                ws: type | str = WS_IMPL) -> AsyncIterator[str]:
    """Yields `127.0.0.1:PORT` of a running pod (`ws`: uvicorn's WebSocket implementation)."""
    runner = EngineThread(profile.info(), engine or (lambda info: SimEngine(profile)))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(settings, runner), ws=ws, log_level="warning",
                            lifespan="on", ws_max_size=4 << 20)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
