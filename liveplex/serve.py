"""`liveplex serve`: one pod, the GPT-Live front end over an engine on its own thread.

The engine (sim by default) runs `drive` on a dedicated thread; uvicorn serves the front end on
uvloop; WebSockets use `gptlive.server.native.LiveProtocol`, uvicorn's sans-I/O implementation with the
live path served natively (performance.md §3.6).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys

from liveplex import engine_pod
from liveplex.gptlive import voices
from liveplex.gptlive.served import Served
from liveplex.gptlive.server import auth, run
from liveplex.gptlive.server import settings as server_settings
from liveplex.live import channel, contract, runner
from liveplex.pod import app as pod_app
from liveplex.pod import heartbeat
from liveplex.pod import settings as pod_settings
from liveplex.pod.pod import Pod
from liveplex.sim_pod import SimEngine, profile_from_args
from liveplex.sim_pod import add_arguments as add_sim_arguments

logger = logging.getLogger(__name__)



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


def _publisher(settings: pod_settings.PodSettings) -> heartbeat.Heartbeat | None:
    """The Redis heartbeat, when the pod belongs to a pool."""
    if settings.redis_url is None or settings.pool is None:
        return None
    return heartbeat.Heartbeat(settings.redis_url, settings.pool, settings.pod_name)


def _personaplex_engine(args: argparse.Namespace) -> tuple[contract.LiveInfo, runner.EngineThread]:
    """Load the checkpoint here (LiveInfo depends on it); the engine is built on its thread."""
    from liveplex.engine_pod import pod  # imports torch: only the personaplex path pays for it

    info, build = pod.prepare(engine_pod.settings_from_args(args))
    engine = runner.EngineThread(info, lambda _: build(engine.pulse), args.queue)
    return info, engine


def _banner(pod: Pod, host: str, port: int) -> str:
    pod.bound = (host, port)
    at, info = run.shown(host), pod.served.info
    return (f"liveplex: serving {info.model} ({info.max_sessions} sessions)\n"
            f"  demo page  http://{at}:{port}/\n"
            f"  GPT-Live   ws://{at}:{port}/v1/live/sessions  (OpenAI(base_url=\"http://{at}:{port}/v1\"))")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    run.configure_logging(args.log_level)
    try:
        built = build_pod(args)
    except ValueError as exc:
        print(f"liveplex serve: {exc}", file=sys.stderr)
        return 2
    pod = built.pod
    run.run(built.app, pod.front.settings, args.host, args.port, lambda host, port: _banner(pod, host, port),
            pod.drain, lambda: pod.draining)
    return 0 if pod.engine.failed is None else 1
