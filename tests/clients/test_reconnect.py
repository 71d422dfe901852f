"""Calls survive their gateway with nothing but the official SDK (issue 42, the client half):
openai 3.63's `client.live.connect(on_reconnecting=...)` behind a real load balancer.

Real parts, all on loopback: Redis, a sim pod, two gateways (`--api-key-file`), Debian's HAProxy
balancing `roundrobin` over them with health checks (tests/support/haproxy.py), and 5 SDK calls
streaming a loud tone in real time in the clients venv (reconnect_calls.py), whose handler returns
`{"extra_query": {"session_id": sid}}` (docs/clients.md, "Calls that survive their gateway"), and in
the kill test the last event id seen too (`last_event_id`: exact even for what died in the gateway):

- the gateway carrying every call is SIGKILLed: each call goes on, the same session, through the
  other gateway; no `error`, no second `session.started`, no server event lost or seen twice (the
  usage events, one per `USAGE_MS` of session time, come in an unbroken row); the silence each
  caller hears is measured (docs/clients.md quotes it).
- a rolling restart: SIGTERM one gateway (its callers are closed 1012 and come back through the
  other), a replacement started on its address, SIGTERM the other: every call goes on.

`-m clients` (scripts/test-clients). Each test takes 7 to 15 s here (2 cores).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.clients.test_frameworks import OPENAI, PYTHON
from tests.support import haproxy, platform, pods

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]

HERE = Path(__file__).parent
KEY = "key-one"
CALLS = int(os.environ.get("LIVEPLEX_RECONNECT_CALLS", "5"))
"""SDK calls in each test; the issue-42 benchmark runs 50 (docs/bench.md "Re-attach")."""
USAGE_MS = 200
"""A usage event every 200 ms of session time: a drop's half second of silence spans two or three, so
one lost (or sent twice) shows as a hole (a repeat) in their row."""
BUDGET_S = 60.0
"""What each test may take, start to end."""


@dataclass
class Stack:
    """A pod, gateways on fixed loopback ports, and HAProxy over them."""

    redis_url: str
    tmp: Path
    keys: Path
    ports: list[int]
    stack: contextlib.ExitStack
    gateways: dict[int, tuple[pods.Running, subprocess.Popen[bytes]]] = field(default_factory=dict)
    lb: haproxy.Balancer | None = None
    started: int = 0

    def start_gateway(self, i: int) -> None:
        """Gateway `i` (HAProxy's `g<i>`) on its port, once it sees the pod."""
        self.started += 1
        running = self.stack.enter_context(pods.subprocess_pod(
            "--redis-url", self.redis_url, "--pool", platform.POOL, "--api-key-file", str(self.keys),
            "--port", str(self.ports[i]), log=self.tmp / f"gateway-{i}-{self.started}.log", command="gateway"))
        self.gateways[i] = running
        platform.eventually(lambda: self.stats(i)["pods"] == 1, f"gateway {i} to see the pod")

    def stats(self, i: int) -> dict:
        return platform.get_json(self.gateways[i][0].admin_root + "/live/stats")  # type: ignore[return-value]

    def signal(self, i: int, sig: signal.Signals) -> float:
        """Send `sig` to gateway `i` and wait for it to exit; how long it took."""
        proc = self.gateways[i][1]
        t0 = time.monotonic()
        proc.send_signal(sig)
        proc.wait(10)
        return time.monotonic() - t0


@contextlib.contextmanager
def stack(redis_url: str, tmp: Path) -> Iterator[Stack]:
    keys = tmp / "keys"
    keys.write_text(f"{KEY}\n")
    with contextlib.ExitStack() as exits:
        exits.enter_context(platform.pod(redis_url, tmp, 0, ("--usage-period-ms", str(USAGE_MS))))
        s = Stack(redis_url, tmp, keys, [haproxy.free_port() for _ in range(2)], exits)
        for i in range(2):
            s.start_gateway(i)
        s.lb = exits.enter_context(haproxy.balancer(tmp, [f"127.0.0.1:{p}" for p in s.ports]))
        yield s


class Callers:
    """reconnect_calls.py in the clients venv: its lines of JSON as they come."""

    def __init__(self, base_url: str, tmp: Path, *flags: str) -> None:
        assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/test-clients (or set LIVEPLEX_CLIENTS_PYTHON)"
        self.stderr = tmp / "callers.err"
        self.proc = subprocess.Popen(
            [str(PYTHON), str(HERE / "reconnect_calls.py"), base_url, str(CALLS), "--key", KEY, *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.stderr, "wb"),  # noqa: SIM115
            text=True, cwd=HERE, env={**os.environ, "PYTHONPATH": ""})
        self.lines: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def next(self, key: str, timeout_s: float) -> dict:
        """The next line that has `key` (lines before it are dropped)."""
        end = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {key!r} from the callers in {timeout_s} s") from None
            if line is None:
                raise AssertionError(f"the callers exited before {key!r}:\n{self.stderr.read_text()[-4000:]}")
            if key in line:
                return line

    def resumed(self, n: int, timeout_s: float = 15.0) -> list[dict]:
        return [self.next("resumed", timeout_s) for _ in range(n)]

    def end(self) -> dict:
        """Every call closes; what each saw."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("end\n")
        self.proc.stdin.flush()
        out = self.next("calls", 30)
        self.proc.wait(10)
        (self.stderr.parent / "calls.json").write_text(json.dumps(out, indent=1))  # to look at after
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def callers(base_url: str, tmp: Path, *flags: str) -> Iterator[Callers]:
    running = Callers(base_url, tmp, *flags)
    try:
        yield running
    finally:
        running.close()


def unbroken(call: dict, session_id: str, drops: int, close_code: int | None = None) -> None:
    """A call went on as one session across `drops` dropped sockets: no error, one start, the same
    id at the end, every server event once and none missing, its audio back after each drop."""
    kinds = [e["type"] for e in call["events"]]
    assert "error" not in kinds, call["events"]
    assert kinds.count("session.started") == 1 and kinds[0] == "session.started"
    assert call["session_id"] == session_id
    assert call["closed"]["id"] == session_id and call["closed"]["reason"] == "close_requested"
    ids = [e["event_id"] for e in call["events"]]
    assert len(ids) == len(set(ids)), "a server event came twice"
    usage = [e["seconds"] for e in call["events"] if e["type"] == "session.usage.updated"]
    steps = [round(b - a, 3) for a, b in zip(usage, usage[1:], strict=False)]
    assert steps and all(abs(s - USAGE_MS / 1000) < 0.09 for s in steps), f"usage events missing or twice: {usage}"
    assert call["closed"]["seconds"] >= usage[-1]
    first = [r for r in call["reconnects"] if r["attempt"] == 1]
    assert len(first) == drops == len(call["gaps"]), call["reconnects"]
    if close_code is not None:
        assert {r["close_code"] for r in first} == {close_code}, call["reconnects"]
    assert call["deltas"] >= 0.6 * call["sent"], "the call's audio did not come back"


def report(what: str, out: dict) -> list[float]:
    """Print the gaps the callers heard (and any send the SDK raised on); the gaps."""
    gaps = [g for c in out["calls"] for g in c["gaps"]]
    failed = [f for c in out["calls"] for f in c["send_failures"]]
    print(f"{what}: {len(gaps)} gaps heard, p50 {statistics.median(gaps):.2f} s, max {max(gaps):.2f} s "
          f"({', '.join(f'{g:.2f}' for g in sorted(gaps))}); sends raised: {failed}")
    return gaps


def test_calls_go_on_through_the_other_gateway_when_theirs_is_killed(redis_url: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    with stack(redis_url, tmp_path) as s:
        assert s.lb is not None
        s.lb.set_state("g1", "maint")  # every call goes through g0
        with callers(s.lb.url, tmp_path, "--last-event-id") as calls:
            ready = calls.next("ready", 30)["ready"]
            assert s.stats(0)["relayed"] == CALLS and s.stats(1)["relayed"] == 0
            s.lb.set_state("g1", "ready")
            s.lb.wait_states({"g1": "UP"})
            time.sleep(1.0)
            s.signal(0, signal.SIGKILL)  # the gateway carrying every call dies
            calls.resumed(CALLS)
            platform.eventually(lambda: s.stats(1)["relayed"] == CALLS, "every call relayed by g1", 5)
            time.sleep(2.0)  # the calls go on
            out = calls.end()
    assert out["openai"] == OPENAI and out["failed"] == []
    for call, session_id in zip(out["calls"], ready, strict=True):
        unbroken(call, session_id, drops=1, close_code=1006)  # no close frame: the TCP connection died
    gaps = report("SIGKILL", out)
    assert max(gaps) < 3.0
    assert time.monotonic() - t0 < BUDGET_S


def test_a_rolling_restart_of_the_gateways_keeps_every_call(redis_url: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    with stack(redis_url, tmp_path) as s:
        assert s.lb is not None
        with callers(s.lb.url, tmp_path) as calls:  # the handler names the session id only
            ready = calls.next("ready", 30)["ready"]
            on_first = s.stats(0)["relayed"]
            assert 0 < on_first < CALLS and s.stats(1)["relayed"] == CALLS - on_first  # round robin
            assert s.signal(0, signal.SIGTERM) < 5  # hands its calls back and exits at once
            calls.resumed(on_first)
            platform.eventually(lambda: s.stats(1)["relayed"] == CALLS, "every call relayed by g1", 5)
            s.start_gateway(0)  # the replacement, on g0's address
            s.lb.wait_states({"g0": "UP"})
            assert s.signal(1, signal.SIGTERM) < 5
            calls.resumed(CALLS)
            platform.eventually(lambda: s.stats(0)["relayed"] == CALLS, "every call relayed by the new g0", 5)
            time.sleep(1.5)
            out = calls.end()
    assert out["failed"] == []
    drops = sorted(len(c["gaps"]) for c in out["calls"])
    assert drops == [1] * (CALLS - on_first) + [2] * on_first
    for call, session_id in zip(out["calls"], ready, strict=True):
        unbroken(call, session_id, drops=len(call["gaps"]), close_code=1012)
    gaps = report("SIGTERM", out)
    assert max(gaps) < 3.0
    assert time.monotonic() - t0 < BUDGET_S
