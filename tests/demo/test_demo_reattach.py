"""The demo page's WebRTC call survives its gateway (issue 42): Chromium's call through HAProxy
(Debian's, `tests/support/haproxy.py`) in front of two gateways, Redis and a sim pod; the gateway
holding the call's media is SIGKILLed; the page hears its agent stop, re-offers with the session's id
through the same address (HAProxy sends it to the other gateway), and the call goes on: the same
session, the echo heard again, the gap shown in the page; the end is `close_requested`."""

from __future__ import annotations

import pathlib
import signal

import pytest
import redis
from playwright import sync_api

from liveplex.placement import keys
from tests.demo.test_demo_page import CALL_TIMEOUT_MS, start_call
from tests.support import haproxy, platform, pods

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(120)]  # aiortc re-offers by default


def _replica(port: int) -> tuple[str, ...]:
    return ("--port", str(port), "--peer-url", f"ws://127.0.0.1:{port}")


def test_the_page_reoffers_when_its_gateway_dies_and_shows_the_gap(
        page: sync_api.Page, redis_url: str, tmp_path: pathlib.Path) -> None:
    a_port, b_port = pods.free_port(), pods.free_port()
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=_replica(a_port)) as p, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *_replica(b_port),
                                log=tmp_path / "gateway-b.log", command="gateway") as (_, b_process), \
            haproxy.balancer(tmp_path, [f"127.0.0.1:{a_port}", f"127.0.0.1:{b_port}"]) as lb:
        start_call(page, f"http://{lb.address}", "/")
        body = page.locator("body")
        sync_api.expect(body).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
        page.wait_for_function("document.getElementById('agent-level').value > 0.3", timeout=CALL_TIMEOUT_MS)
        session_id = page.locator("#session-id").inner_text()
        store = redis.Redis.from_url(redis_url, decode_responses=True)
        holder = store.get(keys.CALL_PREFIX + session_id)
        victim, survivor = ((p.gateway_process, b_port) if holder == f"ws://127.0.0.1:{a_port}"
                            else (b_process, a_port))

        victim.send_signal(signal.SIGKILL)
        sync_api.expect(page.locator("#stat-reconnect")).not_to_have_text("—", timeout=CALL_TIMEOUT_MS)
        gap_ms = int(body.get_attribute("data-gap-ms") or "0")
        sync_api.expect(page.get_by_role("log", name="Agent transcript")).to_contain_text("reconnected: a gap of")
        assert store.get(keys.CALL_PREFIX + session_id) == f"ws://127.0.0.1:{survivor}"
        sync_api.expect(body).to_have_attribute("data-call", "live")
        sync_api.expect(page.locator("#session-id")).to_have_text(session_id)
        page.evaluate("document.getElementById('agent-level').value = 0")
        page.wait_for_function("document.getElementById('agent-level').value > 0.3", timeout=CALL_TIMEOUT_MS)

        page.get_by_role("button", name="End call").click()
        sync_api.expect(body).to_have_attribute("data-ended", "close_requested", timeout=CALL_TIMEOUT_MS)
        assert page.problems == []  # type: ignore[attr-defined]
        platform.eventually(lambda: p.pod_sessions() == [0], "the pod to hold no session")
        print(f"gap the page heard across its gateway's SIGKILL: {gap_ms} ms")
        assert 0 < gap_ms < 2000
