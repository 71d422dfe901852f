"""`liveplex serve`, `gateway`, `up` and `bench baseline` refuse bad input before starting, with one
line naming the flag, and `serve` warns about flags its engine ignores (issue 11, item 6)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from liveplex import listen, serve
from tests.support import pods

pytestmark = pytest.mark.timeout(120)


def refused(*argv: str) -> str:
    """Run `liveplex ARGV`: it must exit 2 at once, saying one line on stderr; that line."""
    done = subprocess.run([sys.executable, "-m", "liveplex.cli", *argv], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and done.stdout == "", done.stderr
    return lines[0]


@pytest.mark.parametrize("flags, says", [
    (("--port", "99999"), "--port must be in 0..65535, got 99999"),
    (("--port", "-1"), "--port must be in 0..65535, got -1"),
    (("--max-sessions", "0"), "--max-sessions must be >= 1, got 0"),
    (("--host", "no-such-host.invalid"), "--host 'no-such-host.invalid' does not resolve"),
    (("--header-timeout-s", "0"), "--header-timeout-s must be > 0, got 0.0"),
    (("--api-key-file", "/nonexistent/keys"), "--api-key-file: cannot read /nonexistent/keys"),
    (("--pace-lead-ms", "-1"), "--pace-lead-ms must lie in [0, 80), got -1.0"),
    (("--pace-lead-ms", "60", "--pace-spread-ms", "20"),
     "--pace-lead-ms + --pace-spread-ms must be < 80 (one tick), got 80.0"),
    (("--admin-port", "70000"), "--admin-port must be in 0..65535, got 70000"),
    (("--max-pending-connections", "0"), "--max-pending-connections must be > 0, got 0"),
    (("--tls-cert", "/nonexistent/cert.pem"), "--tls-cert and --tls-key go together"),
    (("--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"),
     "--tls-cert/--tls-key: cannot load /nonexistent/c.pem"),
    (("--api-key", "caf\u00e9"), "--api-key: key 1 is not printable ASCII"),
    (("--subpools", "0"), "--subpools must lie in [1, 1024], got 0"),
])
def test_serve_refuses_bad_flags_in_one_line_naming_the_flag(flags: tuple[str, ...], says: str) -> None:
    """In this process: `main` prints what `build_checked` raises as its one line (the process's
    exit 2 and its line are shown by the tests below); a process each cost 1.4 CPU-s."""
    with pytest.raises(ValueError) as refusal:
        serve.build_checked(serve.build_parser().parse_args(flags))
    assert str(refusal.value).startswith(says)
    assert "\n" not in str(refusal.value)


def test_a_cuda_device_on_a_machine_without_one_is_one_line_not_a_traceback(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    line = refused("serve", "--engine", "personaplex", "--model-path", str(tmp_path), "--device", "cuda")
    assert line == "liveplex serve: --device cuda: this machine has no CUDA device; use --device cpu"


def test_a_port_in_use_is_named_by_serve_gateway_up_and_the_baseline() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for command in (["serve"], ["gateway", "--redis-url", "redis://127.0.0.1:1"], ["up"], ["bench", "baseline"]):
            line = refused(*command, "--port", port)
            assert line.endswith(f"--host 127.0.0.1 --port {port}: cannot listen there: Address already in use")
    assert refused("gateway", "--redis-url", "redis://127.0.0.1:1", "--port", "70000").endswith(
        "--port must be in 0..65535, got 70000")


def test_the_check_accepts_what_can_be_served() -> None:
    listen.check("127.0.0.1", 0)
    listen.check("localhost", 0)
    with pytest.raises(ValueError, match="^--port must be in 0..65535, got 65536$"):
        listen.check("127.0.0.1", 65536)


def test_serve_warns_in_its_log_about_flags_the_engine_ignores(tmp_path) -> None:
    log = tmp_path / "pod.log"
    with pods.subprocess_pod("--device", "cpu", "--context-frames", "100", log=log):
        pass
    warnings = [json.loads(line) for line in log.read_text().splitlines()
                if line.startswith("{") and '"warning"' in line]
    assert [w["msg"] for w in warnings] == ["--device is ignored by the sim engine",
                                            "--context-frames is ignored by the sim engine"]


def test_every_server_listens_and_every_client_dials_where_listen_says_by_default() -> None:
    """Port 8000 and its base URL are written once (`listen`): the servers, the operator's pods and
    the clients all take them from there."""
    from liveplex import up
    from liveplex.bench import duplex, move
    from liveplex.conformance import cli as conformance
    from liveplex.gateway import cli as gateway
    from liveplex.operator import names

    servers = {"serve": serve.build_parser(), "gateway": gateway.build_parser(), "up": up.build_parser({})}
    assert {name: p.get_default("port") for name, p in servers.items()} == dict.fromkeys(servers, listen.DEFAULT_PORT)
    assert names.PORT == listen.DEFAULT_PORT
    clients = {"bench duplex": duplex.build_parser(), "bench move": move.build_parser()}
    assert {name: p.get_default("base_url") for name, p in clients.items()} == dict.fromkeys(
        clients, listen.DEFAULT_BASE_URL)
    assert conformance.parse_args([])[0].base_url == listen.DEFAULT_BASE_URL
    assert listen.DEFAULT_BASE_URL == f"http://127.0.0.1:{listen.DEFAULT_PORT}/v1"
