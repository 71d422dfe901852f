"""`liveplex serve`: one pod, the GPT-Live front end over an engine on its own thread.

The engine (sim by default) runs `drive` on a dedicated thread; uvicorn serves the front end on
uvloop; WebSockets use `gptlive.server.native.LiveProtocol`, uvicorn's sans-I/O implementation with the
live path served natively (performance.md §3.6).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import signal
import sys
import time
from types import FrameType

import uvicorn

from liveplex import engine_pod
from liveplex.gptlive import voices
from liveplex.gptlive.served import Served
from liveplex.gptlive.server import auth, native
from liveplex.gptlive.server import settings as server_settings
from liveplex.live import channel, contract, runner
from liveplex.pod import app as pod_app
from liveplex.pod import settings as pod_settings
from liveplex.pod.pod import Pod
from liveplex.sim_pod import SimEngine, profile_from_args
from liveplex.sim_pod import add_arguments as add_sim_arguments

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest client message (gpt-live §2.1): above the SDK's 2 MiB, below a memory hazard."""

WS_PROTOCOL = native.LiveProtocol
"""uvicorn's `ws=`: serves `/v1/live/sessions` without ASGI, every other upgrade through the app."""


@dataclasses.dataclass(frozen=True, slots=True)
class Built:
    """What `build_pod` assembles: the pod and the app that serves it."""

    pod: Pod
    app: object

    @property
    def info(self) -> contract.LiveInfo:
        return self.pod.served.info


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="liveplex serve",
        description="Serve GPT-Live (/v1/live/sessions) over an engine; the demo page is at /.")
    parser.add_argument("--engine", choices=["sim", "personaplex"], default="sim",
                        help="the model behind the pod (sim: the CPU echo engine; personaplex: "
                             "PersonaPlex-7B from --model-path)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--queue", type=int, default=channel.DEFAULT_QUEUE,
                        help="submissions the engine queue holds before server_busy")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])
    add_sim_arguments(parser)
    engine_pod.add_arguments(parser)
    server_settings.add_arguments(parser)
    pod_settings.add_arguments(parser)
    return parser


def build_pod(args: argparse.Namespace, make_engine: runner.EngineFactory | None = None) -> Built:
    """Settings parsed once, the engine thread, the pod and its app; raises ValueError naming a
    bad flag. `make_engine` replaces the sim engine (a hand-played engine in tests)."""
    server = server_settings.settings_from_args(args, auth.environment())
    settings = pod_settings.settings_from_args(args)
    custom = voices.registry_ids(settings.voice_dir)
    if args.engine == "personaplex":
        info, engine = _personaplex_engine(args)
    else:
        profile = profile_from_args(args)
        info = profile.info()
        if custom:  # the sim accepts every registered custom voice as a voice of its own
            info = dataclasses.replace(info, voices=tuple(sorted({*info.voices, *custom})))
        engine = runner.EngineThread(info, make_engine or (lambda _: SimEngine(profile)), args.queue)
    served = Served(info, voices.Voices(info.voices, settings.builtin_voices, custom),
                    settings.model_aliases)
    pod = Pod(engine, served, server, settings, _publisher(settings))
    return Built(pod, pod_app.create_app(pod))


def _publisher(settings: pod_settings.PodSettings) -> None:
    """The Redis heartbeat, when the pod belongs to a pool."""
    return None


def _personaplex_engine(args: argparse.Namespace) -> tuple[contract.LiveInfo, runner.EngineThread]:
    """Load the checkpoint here (LiveInfo depends on it); the engine is built on its thread."""
    from liveplex.engine_pod import pod  # imports torch: only the personaplex path pays for it

    info, build = pod.prepare(engine_pod.settings_from_args(args))
    engine = runner.EngineThread(info, lambda _: build(engine.pulse), args.queue)
    return info, engine


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: a fixed message plus the record's `extra` fields."""

    _PLAIN = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(record.created, 3), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in self._PLAIN})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


class _Server(uvicorn.Server):
    """Says where the pod listens once bound (port 0 resolves here); SIGTERM drains first.

    A first SIGTERM drains the pod (platform §5: new starts refused, running sessions finish, the
    rest ended at `--drain-deadline-s`) and then exits; SIGINT, or a second signal, exits at once.
    """

    def __init__(self, config: uvicorn.Config, pod: Pod) -> None:
        super().__init__(config)
        self._pod = pod
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[override]
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if not self.started:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        self._pod.bound = (host, port)
        shown = f"[{host}]" if ":" in host else host
        info = self._pod.served.info
        print(f"liveplex: serving {info.model} ({info.max_sessions} sessions)\n"
              f"  demo page  http://{shown}:{port}/\n"
              f"  GPT-Live   ws://{shown}:{port}/v1/live/sessions"
              f"  (OpenAI(base_url=\"http://{shown}:{port}/v1\"))", flush=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        loop = self._loop
        if sig != signal.SIGTERM or self._pod.draining or loop is None or not self.started:
            super().handle_exit(sig, frame)
            return
        logger.info("SIGTERM: draining before exit")
        loop.call_soon_threadsafe(lambda: loop.create_task(self._drain_then_exit(sig, frame)))

    async def _drain_then_exit(self, sig: int, frame: FrameType | None) -> None:
        await self._pod.drain()
        super().handle_exit(sig, frame)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.log_level)
    try:
        built = build_pod(args)
    except ValueError as exc:
        print(f"liveplex serve: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        built.app, host=args.host, port=args.port, loop="uvloop", http="httptools",
        ws=WS_PROTOCOL, ws_max_size=MAX_MESSAGE_BYTES, lifespan="on",
        log_level="warning", access_log=False, timeout_graceful_shutdown=5,
    )
    started = time.perf_counter()
    server = _Server(config, built.pod)
    server.run()
    logger.info("stopped", extra={"uptime_s": round(time.perf_counter() - started, 1),
                                  "signals": [signal.Signals(s).name for s in server._captured_signals]})
    return 0 if built.pod.engine.failed is None else 1
