"""`liveplex up`: the local platform in one command: Redis, N pods and a gateway on one machine.

It is how a newcomer sees placement work: every process is the real one (`redis-server` from
Debian, `liveplex serve --redis-url ... --pool ...`, `liveplex gateway`), started as children,
listed with where they listen, and stopped together on Ctrl-C (or when one of them dies).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

from liveplex import listen
from liveplex.placement import LocalRedis, LocalRedisError, pool_keys

DEFAULT_POOL = "default/local"
READY_S = 120.0
"""How long a child may take to listen (a PersonaPlex pod loads its checkpoint first)."""


@dataclass(frozen=True, slots=True)
class Child:
    name: str
    url: str
    process: subprocess.Popen[bytes]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="liveplex up", description="Redis, N pods and a gateway on this machine; Ctrl-C stops them all.",
        epilog="Flags after `--` go to every `liveplex serve`, e.g. `-- --model-path ./tiny --device cpu`.")
    parser.add_argument("--pods", type=int, default=2, help="engine pods to start (default: %(default)s)")
    parser.add_argument("--engine", choices=["sim", "personaplex"], default="sim",
                        help="the pods' engine (default: %(default)s)")
    parser.add_argument("--max-sessions", type=int, default=None, help="per pod (default: the engine's)")
    listen.add_arguments(parser, 8000, "the gateway (the host: every process)")
    parser.add_argument("--redis-url", default=None, help="use this Redis (default: start redis-server)")
    parser.add_argument("--pool", default=DEFAULT_POOL, help="the pods' pool (default: %(default)s)")
    return parser


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _listening(host: str, port: int, child: subprocess.Popen[bytes], what: str) -> None:
    """Wait until `host:port` accepts a connection (a child's readiness), or fail naming it."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{what} exited with {child.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {host}:{port} within {READY_S:.0f} s")


def _spawn(args: list[str]) -> subprocess.Popen[bytes]:
    """A child in its own session (Ctrl-C reaches only `liveplex up`, which stops them in order);
    its banner is ours to print, its logs go to stderr."""
    return subprocess.Popen([sys.executable, "-m", "liveplex.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            start_new_session=True)


@contextlib.contextmanager
def platform(args: argparse.Namespace, serve_flags: list[str]) -> Iterator[list[Child]]:
    """Start everything; stop it all on exit (pods and the gateway with SIGINT, then kill)."""
    children: list[Child] = []
    redis = None
    try:
        redis_url = args.redis_url
        if redis_url is None:
            redis = LocalRedis()
            redis_url = redis.start()
        for i in range(args.pods):
            port = _free_port(args.host)
            flags = ["serve", "--engine", args.engine, "--host", args.host, "--port", str(port),
                     "--redis-url", redis_url, "--pool", args.pool, "--advertise", f"ws://{args.host}:{port}",
                     "--pod-name", f"pod-{i}", "--log-level", "warning"]
            if args.max_sessions is not None:
                flags += ["--max-sessions", str(args.max_sessions)]
            child = _spawn(flags + serve_flags)
            children.append(Child(f"pod-{i}", f"http://{args.host}:{port}", child))
        for child in children:
            _listening(args.host, int(child.url.rsplit(":", 1)[1]), child.process, child.name)
        gateway = _spawn(["gateway", "--host", args.host, "--port", str(args.port), "--redis-url", redis_url,
                          "--pool", args.pool, "--log-level", "warning"])
        children.append(Child("gateway", f"http://{args.host}:{args.port}", gateway))
        _listening(args.host, args.port, gateway, "the gateway")
        yield children
    finally:
        for child in children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGINT)
        for child in children:
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        if redis is not None:
            redis.stop()


def main(argv: list[str]) -> int:
    own, serve_flags = _split(argv)
    args = build_parser().parse_args(own)
    if args.pods < 1:
        print(f"liveplex up: --pods must be >= 1, got {args.pods}", file=sys.stderr)
        return 2
    try:
        pool_keys(args.pool)
    except ValueError as exc:
        print(f"liveplex up: --pool: {exc}", file=sys.stderr)
        return 2
    try:
        listen.check(args.host, args.port)
    except ValueError as exc:
        print(f"liveplex up: {exc}", file=sys.stderr)
        return 2
    try:
        with platform(args, serve_flags) as children:
            gateway = children[-1].url
            print(f"liveplex up: {args.pods} {args.engine} pod(s) in pool {args.pool} behind one gateway")
            for child in children[:-1]:
                print(f"  {child.name:<8} {child.url}")
            print(f"  gateway  {gateway}   demo page {gateway}/\n"
                  f"  GPT-Live ws{gateway[4:]}/v1/live/sessions  (OpenAI(base_url=\"{gateway}/v1\"))\n"
                  "Ctrl-C stops everything.", flush=True)
            while all(c.process.poll() is None for c in children):
                time.sleep(0.5)
            dead = [c.name for c in children if c.process.poll() is not None]
            print(f"liveplex up: {', '.join(dead)} exited; stopping the rest", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, LocalRedisError) as exc:
        print(f"liveplex up: {exc}", file=sys.stderr)
        return 1


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """`liveplex up` flags, then everything after `--` for the pods."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []
