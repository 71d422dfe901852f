"""`liveplex up` says where every admin listener is (`/metrics`, where the move counter lives, and
`/live/stats`), and fixes them on request: the gateway's with `--admin-port`, pod i's at
`--pod-admin-ports`+i; a port that cannot be used is refused before anything starts."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from liveplex import up
from tests.support import pods
from tests.up.test_kube_ready import ENV

pytestmark = pytest.mark.timeout(120)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def test_the_banner_names_each_admin_listener_on_the_ports_asked_for(redis_url: str, tmp_path: Path) -> None:
    gateway_admin, pod_admin = pods.free_port(), pods.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "liveplex.cli", "up", "--pods", "2", "--redis-url", redis_url,
                             "--port", str(pods.free_port()), "--admin-port", str(gateway_admin),
                             "--pod-admin-ports", str(pod_admin)],
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "up.log", "wb"), cwd=tmp_path, env=ENV)  # noqa: SIM115
    try:
        assert proc.stdout is not None
        banner = []
        while not banner or not banner[-1].startswith("Ctrl-C"):
            line = proc.stdout.readline().decode()
            assert line, (tmp_path / "up.log").read_text()
            banner.append(line)
        said = "".join(banner)
        for name, port in (("pod-0", pod_admin), ("pod-1", pod_admin + 1), ("gateway", gateway_admin)):
            [line] = [b for b in banner if b.strip().startswith(name)]
            assert line.rstrip().endswith(f"admin http://127.0.0.1:{port}"), said
        assert "liveplex_gateway_sessions_active" in _get(f"http://127.0.0.1:{gateway_admin}/metrics")
        for port in (pod_admin, pod_admin + 1):
            assert '"sessions":0' in _get(f"http://127.0.0.1:{port}/live/stats")
    finally:
        pods.interrupt(proc, 30)


@pytest.mark.parametrize(("flags", "said"), [
    (("--admin-port", "70000"), "--admin-port must be in 0..65535, got 70000"),
    (("--pod-admin-ports", "65535", "--pods", "2"), "--pod-admin-ports must be in 0..65535, got 65536"),
    (("--kube", "--pod-admin-ports", "9000"), "--pod-admin-ports: with --kube every pod's admin listener is the pod "
                                              "template's 9090"),
])
def test_an_admin_port_that_cannot_be_used_is_refused_naming_the_flag(flags: tuple[str, ...], said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(said)):
        up.check_ports(up.build_parser().parse_args(flags))
