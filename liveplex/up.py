"""`liveplex up`: the local platform in one command: Redis, N pods and a gateway on one machine.

It is how a newcomer sees placement work: every process is the real one (`redis-server` from
Debian, `liveplex serve --pool ...`, `liveplex gateway`, the Redis URL in their environment), started as children,
listed with where they listen, and stopped together on Ctrl-C (or when one of them dies).

`liveplex up --kube` puts the same platform behind the development Kubernetes emulator
(`liveplex.emulator`, not a real cluster): the emulator, Redis, the operator and a gateway, with
the LiveEngine CRD installed and a kubeconfig written, so `kubectl apply -f
examples/liveengine-sim.yaml` brings up sim pods (run by the emulator's kubelet from the
operator's rendered pod template) that the gateway places sessions on.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from liveplex import listen, processes
from liveplex.placement import LocalRedis, LocalRedisError, pool_keys, url

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
    parser.add_argument("--redis-url", default=None,
                        help=f"use this Redis (default: ${url.REDIS_URL_ENV}, else start redis-server)")
    parser.add_argument("--pool", default=DEFAULT_POOL, help="the pods' pool (default: %(default)s)")
    parser.add_argument("--kube", action="store_true",
                        help="behind the development Kubernetes emulator: pods come from LiveEngines (default: off)")
    parser.add_argument("--kubeconfig", type=Path, default=Path("liveplex.kubeconfig"),
                        help="with --kube: where to write the kubeconfig (default: %(default)s)")
    parser.add_argument("--state-dir", type=Path, default=Path(".liveplex-emulator"),
                        help="with --kube: pod logs and working directories (default: %(default)s)")
    parser.add_argument("--runtime", choices=("process", "podman"), default="process",
                        help="with --kube: run pods as local processes or as podman containers from local images "
                             "(default: %(default)s)")
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


def _spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A `liveplex` child (`processes.spawn`: Ctrl-C reaches only `liveplex up`, which stops them
    in order; killed with it); its banner is ours to print, its logs go to stderr. The Redis URL
    goes in `env`, never in `args` (a process list shows a password)."""
    return processes.spawn([sys.executable, "-m", "liveplex.cli", *args], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def _stop(children: list[Child]) -> None:
    """SIGINT to every child (the emulator stops its pods on it), then kill what lingers."""
    for child in reversed(children):
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGINT)
    for child in reversed(children):
        try:
            child.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()


@contextlib.contextmanager
def _redis(args: argparse.Namespace) -> Iterator[str]:
    given = url.redis_url(args.redis_url, os.environ)
    if given is not None:
        yield given
        return
    with LocalRedis() as redis:
        yield redis.url


def _install_crd(kubeconfig: Path, emulator: subprocess.Popen) -> None:
    """POST the LiveEngine CRD (what `liveplex operator crd | kubectl apply -f -` does), as the
    emulator's admin: the kubeconfig it writes once it serves has the URL, the CA and the token."""
    import yaml  # the operator extra brings it, as `--kube` needs that extra anyway

    from liveplex.operator import crd  # the operator package, not its kopf shell

    deadline = time.monotonic() + 30
    while not kubeconfig.exists():
        if emulator.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the Kubernetes emulator wrote no kubeconfig")
        time.sleep(0.05)
    config = yaml.safe_load(kubeconfig.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    request = urllib.request.Request(f"{cluster['server']}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                     data=json.dumps(crd.render_crd()).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {user['token']}"})
    try:
        urllib.request.urlopen(request, timeout=10, context=tls).close()
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # already installed
            raise RuntimeError(f"installing the CRD failed: {exc.code} {exc.read()[:200]!r}") from exc


@contextlib.contextmanager
def kube_platform(args: argparse.Namespace) -> Iterator[list[Child]]:
    """The emulator, Redis, the operator and a gateway; pods come from LiveEngines."""
    children: list[Child] = []
    with _redis(args) as redis_url:
        try:
            port = _free_port("127.0.0.1")
            api = f"https://127.0.0.1:{port}"
            args.kubeconfig.unlink(missing_ok=True)  # the emulator writes a new one (new CA, new token)
            emulator = processes.spawn(
                [sys.executable, "-m", "liveplex.emulator", "--port", str(port), "--state-dir", str(args.state_dir),
                 "--kubeconfig", str(args.kubeconfig), "--runtime", args.runtime],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            children.append(Child("emulator", api, emulator))
            _listening("127.0.0.1", port, emulator, "the Kubernetes emulator")
            _install_crd(args.kubeconfig, emulator)
            liveness = _free_port("127.0.0.1")
            operator = _spawn(["operator", "run", "-A", "--liveness",
                               f"http://127.0.0.1:{liveness}/healthz", "--status-interval-s", "2"],
                              {"KUBECONFIG": str(args.kubeconfig.resolve()), url.REDIS_URL_ENV: redis_url})
            children.append(Child("operator", f"http://127.0.0.1:{liveness}/healthz", operator))
            gateway = _spawn(["gateway", "--host", args.host, "--port", str(args.port), "--log-level", "warning"],
                             {url.REDIS_URL_ENV: redis_url})
            children.append(Child("gateway", f"http://{args.host}:{args.port}", gateway))
            _listening(args.host, args.port, gateway, "the gateway")
            _listening("127.0.0.1", liveness, operator, "the operator")
            yield children
        finally:
            _stop(children)


@contextlib.contextmanager
def platform(args: argparse.Namespace, serve_flags: list[str]) -> Iterator[list[Child]]:
    """Redis, the pods and a gateway; stop it all on exit (SIGINT, then kill)."""
    children: list[Child] = []
    with _redis(args) as redis_url:
        try:
            for i in range(args.pods):
                port = _free_port(args.host)
                flags = ["serve", "--engine", args.engine, "--host", args.host, "--port", str(port),
                         "--pool", args.pool, "--advertise", f"ws://{args.host}:{port}",
                         "--pod-name", f"pod-{i}", "--log-level", "warning"]
                if args.max_sessions is not None:
                    flags += ["--max-sessions", str(args.max_sessions)]
                children.append(Child(f"pod-{i}", f"http://{args.host}:{port}",
                                      _spawn(flags + serve_flags, {url.REDIS_URL_ENV: redis_url})))
            for child in children:
                _listening(args.host, int(child.url.rsplit(":", 1)[1]), child.process, child.name)
            gateway = _spawn(["gateway", "--host", args.host, "--port", str(args.port), "--pool", args.pool,
                              "--log-level", "warning"], {url.REDIS_URL_ENV: redis_url})
            children.append(Child("gateway", f"http://{args.host}:{args.port}", gateway))
            _listening(args.host, args.port, gateway, "the gateway")
            yield children
        finally:
            _stop(children)


def main(argv: list[str]) -> int:
    processes.obey_stop_signals()  # a background job (`liveplex up &`) starts with SIGINT ignored
    signal.signal(signal.SIGTERM, _interrupt)  # stop the children on SIGTERM too, not only Ctrl-C
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
        with kube_platform(args) if args.kube else platform(args, serve_flags) as children:
            gateway = next(c.url for c in children if c.name == "gateway")
            if args.kube:
                print("liveplex up --kube: a DEVELOPMENT EMULATOR of Kubernetes (not a cluster), the operator "
                      "and a gateway\n"
                      f"  kubectl --kubeconfig {args.kubeconfig} apply -f examples/liveengine-sim.yaml\n"
                      f"  kubectl --kubeconfig {args.kubeconfig} get le")
            else:
                print(f"liveplex up: {args.pods} {args.engine} pod(s) in pool {args.pool} behind one gateway")
            for child in children:
                if child.name != "gateway":
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
    except (RuntimeError, LocalRedisError, ValueError) as exc:
        print(f"liveplex up: {exc}", file=sys.stderr)
        return 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """`liveplex up` flags, then everything after `--` for the pods."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []
