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
from collections.abc import Mapping

from liveplex import cli, engine_pod, listen, logs
from liveplex.gptlive import voices
from liveplex.gptlive.served import Served
from liveplex.gptlive.server import auth, run
from liveplex.gptlive.server import settings as server_settings
from liveplex.live import channel, contract, fault, runner
from liveplex.pod import app as pod_app
from liveplex.pod import heartbeat, vad
from liveplex.pod import settings as pod_settings
from liveplex.pod.pod import Pod
from liveplex.sim_pod import SimEngine, profile_from_args
from liveplex.sim_pod import add_arguments as add_sim_arguments

logger = logging.getLogger(__name__)

EngineFlags = Mapping[str, tuple[argparse.Action, ...]]
"""engine -> the flags only that engine reads."""


@dataclasses.dataclass(frozen=True, slots=True)
class Built:
    """What `build_pod` assembles: the pod and the app that serves it."""

    pod: Pod
    app: run.App

    @property
    def info(self) -> contract.LiveInfo:
        return self.pod.served.info


def parser_and_engine_flags() -> tuple[argparse.ArgumentParser, EngineFlags]:
    """The `liveplex serve` parser, and which of its flags only one engine reads."""
    parser = argparse.ArgumentParser(
        prog="liveplex serve",
        description="Serve GPT-Live (/v1/live/sessions) over an engine; the demo page is at /.")
    parser.add_argument("--engine", choices=["sim", "personaplex"], default="sim",
                        help="the model behind the pod (sim: the CPU echo engine; personaplex: "
                             "PersonaPlex-7B from --model-path; default: %(default)s)")
    listen.add_arguments(parser, "the pod")
    parser.add_argument("--queue", type=int, default=channel.DEFAULT_QUEUE,
                        help="submissions the engine queue holds before server_busy (default: %(default)s)")
    logs.add_log_level(parser)
    engine_flags = {"sim": add_sim_arguments(parser), "personaplex": engine_pod.add_arguments(parser)}
    server_settings.add_arguments(parser)
    pod_settings.add_arguments(parser)
    return parser, engine_flags


def build_parser() -> argparse.ArgumentParser:
    return parser_and_engine_flags()[0]


def ignored(args: argparse.Namespace, engine_flags: EngineFlags) -> list[str]:
    """The flags given (not at their default) that only another engine than `--engine` reads."""
    return [action.option_strings[0] for engine, actions in engine_flags.items() if engine != args.engine
            for action in actions if getattr(args, action.dest) != action.default]


def build_pod(args: argparse.Namespace, make_engine: runner.EngineFactory | None = None) -> Built:
    """Settings parsed once, the engine thread, the pod and its app; raises ValueError naming a
    bad flag. `make_engine` replaces the sim engine (a hand-played engine in tests)."""
    if args.max_sessions is not None and args.max_sessions < 1:
        raise ValueError(f"--max-sessions must be >= 1, got {args.max_sessions} (leave it out for the "
                         "engine's own cap)")
    if args.queue < 1:
        raise ValueError(f"--queue must be >= 1, got {args.queue}")
    if args.fail_after_ticks < 0:
        raise ValueError(f"--fail-after-ticks must be >= 0, got {args.fail_after_ticks}")
    server = server_settings.settings_from_args(args, auth.environment())
    settings = pod_settings.settings_from_args(args, auth.environment())
    if settings.pause.on:  # the WebSocket extension asks for the detector: refused before anything starts
        with cli.needs("pause"):
            vad.require()
    custom = voices.registry_ids(settings.voice_dir)
    if args.engine == "personaplex":
        info, engine = _personaplex_engine(args, settings)
    else:
        profile = profile_from_args(args)
        info = profile.info()
        if custom:  # the sim accepts every registered custom voice as a voice of its own
            info = dataclasses.replace(info, voices=tuple(sorted({*info.voices, *custom})))
        make = make_engine or (lambda _: SimEngine(profile, engine.pulse))
        engine = runner.EngineThread(info, fault.failing_after(make, args.fail_after_ticks), args.queue,
                                     settings.pacing)
    served = Served(info, voices.Voices(info.voices, settings.builtin_voices, custom),
                    settings.model_aliases, pauses=settings.pause.max_paused > 0 and vad.missing() is None)
    pod = Pod(engine, served, server, settings, _publisher(settings))
    return Built(pod, pod_app.create_app(pod))


def build_checked(args: argparse.Namespace) -> Built:
    """`build_pod` once both addresses are known to listen: every refusal `main` prints, raised
    before anything starts (so a test can ask for it without a process)."""
    listen.check(args.host, args.port)
    listen.check(args.admin_host, args.admin_port, listen.ADMIN_FLAGS)
    return build_pod(args)


def _publisher(settings: pod_settings.PodSettings) -> heartbeat.Heartbeat | None:
    """The Redis heartbeat, when the pod belongs to a pool."""
    if settings.redis_url is None or settings.pool is None:
        return None
    return heartbeat.Heartbeat(settings.redis_url, settings.pool, settings.pod_name, settings.subpools)


def _personaplex_engine(args: argparse.Namespace,
                        settings: pod_settings.PodSettings) -> tuple[contract.LiveInfo, runner.EngineThread]:
    """Load the checkpoint here (LiveInfo depends on it); the engine is built on its thread."""
    with cli.needs("personaplex"):
        from liveplex.engine_pod import pod  # imports torch: only the personaplex path pays for it

    info, build = pod.prepare(engine_pod.settings_from_args(args))
    engine = runner.EngineThread(info, fault.failing_after(lambda _: build(engine.pulse), args.fail_after_ticks),
                                 args.queue, settings.pacing)
    return info, engine


def _banner(pod: Pod, host: str, port: int) -> str:
    pod.bind(host, port)
    info = pod.served.info
    return run.banner(f"liveplex: serving {info.model} ({info.max_sessions} sessions)", host, port)


def main(argv: list[str]) -> int:
    parser, engine_flags = parser_and_engine_flags()
    args = parser.parse_args(argv)
    logs.configure_logging(args.log_level)
    for flag in ignored(args, engine_flags):
        logger.warning(f"{flag} is ignored by the {args.engine} engine", extra={"flag": flag})
    try:
        built = build_checked(args)
    except ValueError as exc:
        print(f"liveplex serve: {exc}", file=sys.stderr)
        return 2
    pod = built.pod
    run.run(built.app, pod.front, args.host, args.port, lambda host, port: _banner(pod, host, port),
            pod.drain, lambda: pod.draining)
    return 0 if pod.engine.failed is None else 1
