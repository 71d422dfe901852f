"""Calls survive their gateway with nothing but the official SDK (issue 42, the client half):
openai 3.63's `client.live.connect(on_reconnecting=...)` behind a real load balancer.

Real parts, all on loopback: Redis, a sim pod, gateways (`--api-key-file`), Debian's HAProxy
balancing `roundrobin` over them with health checks (tests/support/haproxy.py), and 5 SDK calls
(`LIVEPLEX_RECONNECT_CALLS`; the issue's benchmark runs 50, docs/bench.md "Re-attach") streaming a
loud tone in real time in the clients venv (reconnect_calls.py), started at the rate one API key may
start calls, whose handler returns `{"extra_query": {"session_id": sid}}` (docs/clients.md, "Calls
that survive their gateway"), and in the kill test the last event id seen too (`last_event_id`:
exact even for what died in the gateway):

- of two gateways, the one carrying every call is SIGKILLed: each call goes on, the same session,
  through the other; no `error`, no second `session.started`, no server event lost or seen twice
  (the usage events, one per `USAGE_MS` of session time, come in an unbroken row); the silence each
  caller hears is measured (docs/clients.md quotes it).
- a rolling restart as the chart's Deployment makes it (`maxSurge: 1`, `maxUnavailable: 0`): a new
  gateway started and ready, then an old one SIGTERMed (its callers are closed 1012 and come back
  through the others), twice: every call goes on and ends on a new gateway; the rollout's time is
  measured.

Both hold the issue's targets: gaps p50 <= 0.8 s and p99 <= 1.5 s, the rollout under 30 s.
`-m clients` (scripts/test-clients). Each test takes 10 to 20 s here with 5 calls (2 cores).
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

from liveplex.flags import default_of
from liveplex.gateway.settings import GatewaySettings
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
STARTS_PER_S: float = default_of(GatewaySettings, "starts_per_key_per_s")
"""The callers arrive at the rate one key may start calls: faster, the gateway refuses them."""
GAP_P50_S, GAP_P99_S, ROLLOUT_S = 0.8, 1.5, 30.0
"""Issue 42's targets: the silence a caller hears, and a rollout of every gateway under calls."""
BUDGET_S = 60.0 + CALLS / STARTS_PER_S
"""What each test may take, start to end."""


@dataclass
class Stack:
    """A pod, gateways on fixed loopback ports (a port's gateway may come later), and HAProxy over
    them all."""

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

    def relayed(self, i: int) -> int:
        return self.stats(i)["relayed"]

    def signal(self, i: int, sig: signal.Signals) -> float:
        """Send `sig` to gateway `i` and wait for it to exit; how long it took."""
        proc = self.gateways[i][1]
        t0 = time.monotonic()
        proc.send_signal(sig)
        proc.wait(10)
        return time.monotonic() - t0


@contextlib.contextmanager
def stack(redis_url: str, tmp: Path, later: int = 0) -> Iterator[Stack]:
    """Two gateways running, and `later` more ports in HAProxy for their replacements (DOWN until
    started)."""
    keys = tmp / "keys"
    keys.write_text(f"{KEY}\n")
    with contextlib.ExitStack() as exits:
        exits.enter_context(platform.pod(redis_url, tmp, 0, ("--usage-period-ms", str(USAGE_MS))))
        s = Stack(redis_url, tmp, keys, [haproxy.free_port() for _ in range(2 + later)], exits)
        for i in range(2):
            s.start_gateway(i)
        s.lb = exits.enter_context(haproxy.balancer(tmp, [f"127.0.0.1:{p}" for p in s.ports], wait_up=False))
        s.lb.wait_states({f"g{i}": "UP" if i < 2 else "DOWN" for i in range(len(s.ports))})
        yield s


class Callers:
    """reconnect_calls.py in the clients venv: its lines of JSON as they come."""

    def __init__(self, base_url: str, tmp: Path, *flags: str) -> None:
        assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/test-clients (or set LIVEPLEX_CLIENTS_PYTHON)"
        self.stderr = tmp / "callers.err"
        self.proc = subprocess.Popen(
            [str(PYTHON), str(HERE / "reconnect_calls.py"), base_url, str(CALLS), "--key", KEY,
             "--starts-per-s", str(STARTS_PER_S), "--ready-s", str(20 + CALLS / STARTS_PER_S), *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.stderr, "wb"),  # noqa: SIM115
            text=True, cwd=HERE, env={**os.environ, "PYTHONPATH": ""})
        self.lines: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Each line as it comes, with when it came (`at`, this machine's monotonic clock)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put({**json.loads(line), "at": time.monotonic()})
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
        out = self.next("calls", 30 + CALLS / 10)
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


def report(what: str, out: dict, **measured: float) -> list[float]:
    """Print the gaps the callers heard, their p50/p99/max and `measured` as one line of JSON (what
    docs/bench.md records), and any send the SDK raised on; hold them to the issue's targets."""
    gaps = sorted(g for c in out["calls"] for g in c["gaps"])
    p50, p99 = statistics.median(gaps), statistics.quantiles(gaps, n=100, method="inclusive")[98]
    failed = [f for c in out["calls"] for f in c["send_failures"]]
    print(json.dumps({"what": what, "calls": len(out["calls"]), "gaps": len(gaps), "p50_s": round(p50, 3),
                      "p99_s": round(p99, 3), "max_s": max(gaps), **{k: round(v, 2) for k, v in measured.items()},
                      "sends_raised": len(failed)}))
    print(f"  gaps: {', '.join(f'{g:.2f}' for g in gaps)}")
    assert p50 <= GAP_P50_S and p99 <= GAP_P99_S, f"gaps p50 {p50:.2f} s, p99 {p99:.2f} s"
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
    report("SIGKILL", out)
    assert time.monotonic() - t0 < BUDGET_S


def test_a_rolling_restart_of_the_gateways_keeps_every_call(redis_url: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    with stack(redis_url, tmp_path, later=2) as s:
        assert s.lb is not None
        with callers(s.lb.url, tmp_path) as calls:  # the handler names the session id only
            ready = calls.next("ready", 30 + CALLS / STARTS_PER_S)["ready"]
            assert 0 < s.relayed(0) < CALLS and s.relayed(1) == CALLS - s.relayed(0)  # round robin
            rollout = time.monotonic()
            handed_back, stopped = 0, []
            for old, new in ((0, 2), (1, 3)):  # maxSurge 1, maxUnavailable 0: the new one ready first
                s.start_gateway(new)
                s.lb.wait_states({f"g{new}": "UP"})
                held = s.relayed(old)  # none moves until `old` closes them
                stopped.append(time.monotonic())
                assert s.signal(old, signal.SIGTERM) < 5  # hands its calls back and exits at once
                last = max((line["at"] for line in calls.resumed(held)), default=stopped[-1])
                handed_back += held
            assert s.relayed(2) + s.relayed(3) == CALLS  # every call on a new gateway
            time.sleep(1.5)
            out = calls.end()
    assert out["failed"] == []
    assert sum(len(c["gaps"]) for c in out["calls"]) == handed_back
    for call, session_id in zip(out["calls"], ready, strict=True):
        unbroken(call, session_id, drops=len(call["gaps"]), close_code=1012)
    report("rolling restart", out, rollout_s=last - rollout, first_sigterm_to_last_call_s=last - stopped[0])
    assert last - rollout < ROLLOUT_S
    assert time.monotonic() - t0 < BUDGET_S
