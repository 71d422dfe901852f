"""`liveplex gateway`: one GPT-Live endpoint placing sessions on the pods of its pools."""

from __future__ import annotations

import argparse
import sys

from liveplex import listen, logs
from liveplex.gateway import app, settings
from liveplex.gateway.gateway import Gateway
from liveplex.gptlive.server import auth, run
from liveplex.gptlive.server import settings as server_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="liveplex gateway",
        description="Serve GPT-Live (/v1/live/sessions) by placing each session on a pod of its pool.")
    listen.add_arguments(parser, "the gateway")
    logs.add_log_level(parser)
    settings.add_arguments(parser)
    server_settings.add_arguments(parser)
    return parser


def build(args: argparse.Namespace) -> tuple[Gateway, run.App]:
    """The gateway and its app; raises ValueError naming a bad flag."""
    environ = auth.environment()
    gateway = Gateway(settings.settings_from_args(args, environ), server_settings.settings_from_args(args, environ))
    return gateway, app.create_app(gateway)


def _banner(host: str, port: int) -> str:
    return run.banner("liveplex gateway: placing sessions", host, port)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    logs.configure_logging(args.log_level)
    try:
        listen.check(args.host, args.port)
        listen.check(args.admin_host, args.admin_port, listen.ADMIN_FLAGS)
        gateway, application = build(args)
    except ValueError as exc:
        print(f"liveplex gateway: {exc}", file=sys.stderr)
        return 2
    run.run(application, gateway.front, args.host, args.port, _banner, gateway.drain,
            lambda: gateway.draining)
    return 0
