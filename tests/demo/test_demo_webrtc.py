"""The demo page over WebRTC, its default: Debian's Chromium's own WebRTC stack (ICE, DTLS, SRTP,
Opus, SCTP) with a fake microphone reading a WAV file, against a real pod, over the machine's
own interface (no STUN, no TURN)."""

from __future__ import annotations

import pytest
from playwright import sync_api

from tests.demo import conftest
from tests.demo.test_demo_page import CALL_TIMEOUT_MS, start_call

pytestmark = pytest.mark.browser


def _agent_level(page: sync_api.Page) -> float:
    return float(page.locator("#agent-level").evaluate("meter => meter.value"))


def test_a_webrtc_call_is_heard_and_steered_over_the_data_channel(page: sync_api.Page, pod: str) -> None:
    """The call goes live over WebRTC (the stats say so), the sim's words come over the data
    channel, its echo is heard on the remote track (the agent meter moves), mute is acknowledged,
    and the end is `close_requested`."""
    start_call(page, pod, "/")
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("#stat-transport")).to_have_text("WebRTC")
    transcript = page.get_by_role("log", name="Agent transcript")
    sync_api.expect(transcript).to_contain_text("I hear you", timeout=CALL_TIMEOUT_MS)
    page.wait_for_function("document.getElementById('agent-level').value > 0.3", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("#stat-sessions")).to_have_text("1 / 64", timeout=CALL_TIMEOUT_MS)

    page.get_by_role("button", name="Mute").click()
    sync_api.expect(page.get_by_role("button", name="Unmute")).to_have_attribute("aria-pressed", "true")
    conftest.ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(conftest.ARTIFACTS / "demo-webrtc.png"), full_page=True)

    page.get_by_role("button", name="End call").click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-ended", "close_requested", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "idle")
    sync_api.expect(page.get_by_role("button", name="Start call")).to_be_enabled()
    assert page.problems == []  # type: ignore[attr-defined]


def test_a_full_pod_over_webrtc_is_server_busy_and_the_retry_gets_in(
    browser: sync_api.Browser, one_slot_pod: str
) -> None:
    with conftest.watched_page(browser) as first, conftest.watched_page(browser) as second:
        start_call(first, one_slot_pod, "/")
        sync_api.expect(first.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
        start_call(second, one_slot_pod, "/")
        sync_api.expect(second.get_by_role("alert")).to_contain_text("The pod is full", timeout=CALL_TIMEOUT_MS)
        sync_api.expect(second.locator("body")).to_have_attribute("data-call", "ready")
        first.get_by_role("button", name="End call").click()
        sync_api.expect(first.locator("body")).to_have_attribute("data-ended", "close_requested",
                                                                 timeout=CALL_TIMEOUT_MS)
        second.get_by_role("button", name="Retry").click()
        sync_api.expect(second.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
        second.get_by_role("button", name="End call").click()
        sync_api.expect(second.locator("body")).to_have_attribute("data-ended", "close_requested",
                                                                  timeout=CALL_TIMEOUT_MS)
        assert first.problems == []  # type: ignore[attr-defined]
        # the refused create is the one console error the browser reports itself
        assert all("503" in p for p in second.problems), second.problems  # type: ignore[attr-defined]
