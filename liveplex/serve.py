"""`liveplex serve`: one pod, the GPT-Live front end over an engine on its own thread.

The engine (sim by default) runs `drive` on a dedicated thread; uvicorn serves the front end on
uvloop; WebSockets use `gptlive.native.LiveProtocol`, uvicorn's sans-I/O implementation with the
live path served natively (performance.md §3.6).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time

import uvicorn

from liveplex import engine_pod, gptlive
from liveplex.gptlive import native, voices
from liveplex.live import channel, contract, runner
from liveplex.sim_pod import SimEngine, profile_from_args
from liveplex.sim_pod import add_arguments as add_sim_arguments

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest client message (gpt-live §2.1): above the SDK's 2 MiB, below a memory hazard."""

WS_PROTOCOL = native.LiveProtocol
"""uvicorn's `ws=`: serves `/v1/live/sessions` without ASGI, every other upgrade through the app."""


@dataclasses.dataclass(frozen=True, slots=True)
class Pod:
    """What `build_pod` assembles: the app to serve and the engine thread behind it."""

    app: object
    engine: runner.EngineThread
    info: contract.LiveInfo


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
    gptlive.add_arguments(parser)
    return parser


def build_pod(args: argparse.Namespace) -> Pod:
    """Settings parsed once, the engine thread and the app; raises ValueError naming a bad flag."""
    settings = gptlive.settings_from_args(args)
    if args.engine == "personaplex":
        return _personaplex_pod(args, settings)
    profile = profile_from_args(args)
    info = profile.info()
    custom = voices.registry_ids(settings.voice_dir)
    if custom:  # the sim accepts every registered custom voice as a voice of its own
        info = dataclasses.replace(info, voices=tuple(sorted({*info.voices, *custom})))
    engine = runner.EngineThread(info, lambda _: SimEngine(profile), args.queue)
    return Pod(gptlive.create_app(settings, engine), engine, info)


def _personaplex_pod(args: argparse.Namespace, front: gptlive.Settings) -> Pod:
    """Load the checkpoint here (LiveInfo depends on it); the engine is built on its thread."""
    from liveplex.engine_pod import pod  # imports torch: only the personaplex path pays for it

    info, build = pod.prepare(engine_pod.settings_from_args(args))
    engine = runner.EngineThread(info, lambda _: build(engine.pulse), args.queue)
    return Pod(gptlive.create_app(front, engine), engine, info)


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
    """Says where the pod listens once the socket is bound (port 0 resolves here)."""

    def __init__(self, config: uvicorn.Config, info: contract.LiveInfo) -> None:
        super().__init__(config)
        self._info = info

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[override]
        await super().startup(sockets)
        if not self.started:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(f"liveplex: serving {self._info.model} ({self._info.max_sessions} sessions)\n"
              f"  demo page  http://{shown}:{port}/\n"
              f"  GPT-Live   ws://{shown}:{port}/v1/live/sessions"
              f"  (OpenAI(base_url=\"http://{shown}:{port}/v1\"))", flush=True)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.log_level)
    try:
        pod = build_pod(args)
    except ValueError as exc:
        print(f"liveplex serve: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        pod.app, host=args.host, port=args.port, loop="uvloop", http="httptools",
        ws=WS_PROTOCOL, ws_max_size=MAX_MESSAGE_BYTES, lifespan="on",
        log_level="warning", access_log=False, timeout_graceful_shutdown=5,
    )
    started = time.perf_counter()
    server = _Server(config, pod.info)
    server.run()
    logger.info("stopped", extra={"uptime_s": round(time.perf_counter() - started, 1)})
    return 0 if pod.engine.failed is None else 1
