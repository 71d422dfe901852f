"""`liveplex up`: the local platform in one command: Redis, N pods and a gateway on one machine.

It is how a newcomer sees placement work: every process is the real one (`redis-server` from
Debian, `liveplex serve --pool ...`, `liveplex gateway`, the Redis URL in their environment), started as children,
listed with where they listen (the admin listeners too: `/metrics`, `/live/stats`), and stopped
together on Ctrl-C (or when one of them dies).

`liveplex up --kube` puts the same platform behind the development Kubernetes emulator
(`liveplex.emulator`, not a real cluster): the emulator, Redis, the operator and a gateway, with
the LiveEngine CRD installed, so `kubectl apply -f examples/liveengine-sim.yaml` brings up sim
pods (run by the emulator's kubelet from the operator's rendered pod template) that the gateway
places sessions on. Its kubeconfig appears only once that apply can succeed (`up_kube`), and
with the emulator's state lives under `$XDG_STATE_HOME/liveplex`, out of the checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from liveplex import listen, processes, up_kube
from liveplex.operator import names
from liveplex.placement import LocalRedis, LocalRedisError, pool_keys, url

DEFAULT_POOL = "default/local"
READY_S = 120.0
"""How long a child may take to listen (a PersonaPlex pod loads its checkpoint first)."""


@dataclass(frozen=True, slots=True)
class Child:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    admin: str = ""
    """Its admin listener's URL (`/metrics`, `/live/stats`, `/drain`), if it has one."""


def build_parser(environ: Mapping[str, str] = os.environ) -> argparse.ArgumentParser:
    state = up_kube.state_home(environ)
    parser = argparse.ArgumentParser(
        prog="liveplex up", description="Redis, N pods and a gateway on this machine; Ctrl-C stops them all.",
        epilog="Flags after `--` go to every `liveplex serve`, e.g. `-- --model-path ./tiny --device cpu`.")
    parser.add_argument("--pods", type=int, default=2, help="engine pods to start (default: %(default)s)")
    parser.add_argument("--engine", choices=["sim", "personaplex"], default="sim",
                        help="the pods' engine (default: %(default)s)")
    parser.add_argument("--max-sessions", type=int, default=None, help="per pod (default: the engine's)")
    listen.add_arguments(parser, "the gateway (the host: every process)")
    parser.add_argument("--admin-port", type=int, default=0,
                        help="the gateway's admin listener (/metrics, /live/stats) on 127.0.0.1; 0 picks a free "
                             "one, printed (default: %(default)s)")
    parser.add_argument("--pod-admin-ports", type=int, default=0, metavar="PORT",
                        help="pod i's admin listener on PORT+i (127.0.0.1); 0 picks free ones, printed; with --kube "
                             f"the pod template's {names.ADMIN_PORT} on each pod's own address (default: %(default)s)")
    parser.add_argument("--redis-url", default=None,
                        help=f"use this Redis (default: ${url.REDIS_URL_ENV}, else start redis-server)")
    parser.add_argument("--pool", default=DEFAULT_POOL, help="the pods' pool (default: %(default)s)")
    parser.add_argument("--kube", action="store_true",
                        help="behind the development Kubernetes emulator: pods come from LiveEngines (default: off)")
    parser.add_argument("--kubeconfig", type=Path, default=state / "kubeconfig",
                        help="with --kube: where to write the kubeconfig, once a LiveEngine can be applied; removed "
                             "on exit (default: %(default)s, from $XDG_STATE_HOME)")
    parser.add_argument("--state-dir", type=Path, default=state / "emulator",
                        help="with --kube: the emulator's pod logs and working directories (default: %(default)s)")
    parser.add_argument("--wait", type=float, nargs="?", const=READY_S, default=None, metavar="S",
                        help="with --kube: start nothing; wait (up to S seconds, %(const).0f when not given) until the "
                             "`liveplex up --kube` writing --kubeconfig is ready, print that path and exit "
                             "(`export KUBECONFIG=$(liveplex up --kube --wait)`) (default: off)")
    parser.add_argument("--store-dir", type=Path, default=state / "stored",
                        help="where the gateway keeps stored calls (store: true, docs/storage.md; default: "
                             "%(default)s, from $XDG_STATE_HOME)")
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


STOP_S = 15.0
"""How long each child has to stop on SIGINT before it is killed."""


def _stop(children: list[Child]) -> None:
    """SIGINT to every child (the emulator stops its pods on it), then kill what lingers.

    A second Ctrl-C (or SIGTERM) while they stop means "hurry": it kills them now, instead of
    unwinding out of here and stopping Redis under pods still heartbeating to it."""
    hurry = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: hurry.set())
    for child in reversed(children):
        if child.process.poll() is None:
            child.process.send_signal(signal.SIGINT)
    for child in reversed(children):
        deadline = time.monotonic() + STOP_S
        while child.process.poll() is None and not hurry.is_set() and time.monotonic() < deadline:
            hurry.wait(0.05)
        if child.process.poll() is None:
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


def _gateway(args: argparse.Namespace, redis_url: str, *flags: str) -> Child:
    """The gateway on `--port`, its admin listener on `--admin-port` (or a free one)."""
    admin = args.admin_port or _free_port("127.0.0.1")
    process = _spawn(["gateway", "--host", args.host, "--port", str(args.port), "--admin-port", str(admin), *flags,
                      "--store-dir", str(args.store_dir), "--log-level", "warning"], {url.REDIS_URL_ENV: redis_url})
    return Child("gateway", f"http://{args.host}:{args.port}", process, f"http://127.0.0.1:{admin}")


@contextlib.contextmanager
def kube_platform(args: argparse.Namespace) -> Iterator[list[Child]]:
    """The emulator, Redis, the operator and a gateway; pods come from LiveEngines. The user's
    kubeconfig is written last, once all of it is ready (`up_kube`), and removed on the way out."""
    children: list[Child] = []
    private = args.state_dir / up_kube.EMULATOR_KUBECONFIG
    with _redis(args) as redis_url:
        try:
            port = _free_port("127.0.0.1")
            for stale in (args.kubeconfig, private):  # the emulator writes a new one (new CA, new token)
                stale.unlink(missing_ok=True)
            emulator = processes.spawn(
                [sys.executable, "-m", "liveplex.emulator", "--port", str(port), "--state-dir", str(args.state_dir),
                 "--kubeconfig", str(private), "--runtime", args.runtime],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            children.append(Child("emulator", f"https://127.0.0.1:{port}", emulator))
            up_kube.until(private.exists, "the Kubernetes emulator wrote no kubeconfig", READY_S, emulator)
            api = up_kube.Api.read(private)
            up_kube.install_crd(api)
            up_kube.until(lambda: up_kube.crd_served(api), "the LiveEngine CRD was not served", READY_S, emulator)
            liveness = _free_port("127.0.0.1")
            operator = _spawn(["operator", "run", "-A", "--liveness",
                               f"http://127.0.0.1:{liveness}/healthz", "--status-interval-s", "2"],
                              {"KUBECONFIG": str(private.resolve()), url.REDIS_URL_ENV: redis_url})
            children.append(Child("operator", f"http://127.0.0.1:{liveness}/healthz", operator))
            gateway = _gateway(args, redis_url)
            children.append(gateway)
            _listening(args.host, args.port, gateway.process, "the gateway")
            _listening("127.0.0.1", liveness, operator, "the operator")
            up_kube.publish(private, args.kubeconfig)
            yield children
        finally:
            args.kubeconfig.unlink(missing_ok=True)
            _stop(children)


@contextlib.contextmanager
def platform(args: argparse.Namespace, serve_flags: list[str]) -> Iterator[list[Child]]:
    """Redis, the pods and a gateway; stop it all on exit (SIGINT, then kill)."""
    children: list[Child] = []
    with _redis(args) as redis_url:
        try:
            for i in range(args.pods):
                port = _free_port(args.host)
                admin = args.pod_admin_ports + i if args.pod_admin_ports else _free_port("127.0.0.1")
                flags = ["serve", "--engine", args.engine, "--host", args.host, "--port", str(port),
                         "--admin-port", str(admin), "--pool", args.pool, "--advertise", f"ws://{args.host}:{port}",
                         "--pod-name", f"pod-{i}", "--log-level", "warning"]
                if args.max_sessions is not None:
                    flags += ["--max-sessions", str(args.max_sessions)]
                children.append(Child(f"pod-{i}", f"http://{args.host}:{port}",
                                      _spawn(flags + serve_flags, {url.REDIS_URL_ENV: redis_url}),
                                      f"http://127.0.0.1:{admin}"))
            for child in children:
                _listening(args.host, int(child.url.rsplit(":", 1)[1]), child.process, child.name)
            gateway = _gateway(args, redis_url, "--pool", args.pool)
            children.append(gateway)
            _listening(args.host, args.port, gateway.process, "the gateway")
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
    if args.wait is not None:
        if not args.kube or args.wait <= 0:
            print(f"liveplex up: --wait waits for a `liveplex up --kube` (give --kube too) for S > 0 seconds, "
                  f"got {args.wait}", file=sys.stderr)
            return 2
        return up_kube.wait(args.kubeconfig, args.wait)
    if args.kube:
        up_kube.require()
    try:
        check_ports(args)
    except ValueError as exc:
        print(f"liveplex up: {exc}", file=sys.stderr)
        return 2
    try:
        with kube_platform(args) if args.kube else platform(args, serve_flags) as children:
            print(banner(args, children), flush=True)
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


def check_ports(args: argparse.Namespace) -> None:
    """Raises ValueError naming the flag whose port cannot be listened on."""
    listen.check(args.host, args.port)
    listen.check("127.0.0.1", args.admin_port, ("--host", "--admin-port"))
    if args.pod_admin_ports and args.kube:
        raise ValueError(f"--pod-admin-ports: with --kube every pod's admin listener is the pod template's "
                         f"{names.ADMIN_PORT}, on the pod's own address")
    if args.pod_admin_ports:
        for port in range(args.pod_admin_ports, args.pod_admin_ports + args.pods):
            listen.check("127.0.0.1", port, ("--host", "--pod-admin-ports"))


def banner(args: argparse.Namespace, children: list[Child]) -> str:
    """What `up` prints once everything listens: every child, where it listens and its admin listener."""
    if args.kube:
        config = args.kubeconfig
        lines = ["liveplex up --kube: a DEVELOPMENT EMULATOR of Kubernetes (not a cluster), the operator and a gateway",
                 f"  kubectl --kubeconfig {config} apply -f examples/liveengine-sim.yaml",
                 f"  kubectl --kubeconfig {config} get le",
                 f"  kubeconfig {config} (removed on exit); emulator state {args.state_dir}"]
    else:
        lines = [f"liveplex up: {args.pods} {args.engine} pod(s) in pool {args.pool} behind one gateway"]
    for child in children:
        if child.name != "gateway":
            lines.append(f"  {child.name:<8} {child.url}" + (f"   admin {child.admin}" if child.admin else ""))
    if args.kube:
        lines.append(f"  pods     admin http://POD_IP:{names.ADMIN_PORT} (kubectl get pods -o wide)")
    gateway = next(c for c in children if c.name == "gateway")
    lines += [f"  gateway  {gateway.url}   demo page {gateway.url}/   admin {gateway.admin}",
              f"  GPT-Live ws{gateway.url[4:]}/v1/live/sessions  (OpenAI(base_url=\"{gateway.url}/v1\"))",
              f"  stored calls (store: true) in {args.store_dir}",
              "  /metrics and /live/stats are on each admin listener.",
              "Ctrl-C stops everything."]
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """`liveplex up` flags, then everything after `--` for the pods."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []
