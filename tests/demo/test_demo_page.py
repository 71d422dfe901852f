"""The demo page end to end: Debian's Chromium with a fake microphone talks to a real pod."""

from __future__ import annotations

import re

import pytest
from playwright import sync_api

from tests.demo import conftest

pytestmark = pytest.mark.browser

CALL_TIMEOUT_MS = 30_000
"""Generous: the sim says its third word after ~18 loud frames (1.5 s), but CI machines are slow."""


SOCKET = "/?transport=websocket"
"""The page over the WebSocket (its default is WebRTC, test_demo_webrtc.py)."""


def test_call_shows_the_agents_words_and_ends_cleanly(page: sync_api.Page, pod: str) -> None:
    page.goto(pod + SOCKET)
    sync_api.expect(page.locator("#model")).not_to_have_text("…")
    sync_api.expect(page.get_by_label("Voice")).not_to_be_empty()
    sync_api.expect(page.get_by_label("Persona")).not_to_be_empty()

    page.get_by_role("button", name="Start call").click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.get_by_role("button", name="Mute")).to_be_enabled()
    transcript = page.get_by_role("log", name="Agent transcript")
    sync_api.expect(transcript).to_contain_text("I hear you", timeout=CALL_TIMEOUT_MS)
    # The stats poll has seen this call: the pod counts one session and the page has heard frames.
    sync_api.expect(page.locator("#stat-sessions")).to_have_text(re.compile(r"^1 / \d+$"), timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("#stat-late")).to_have_text(re.compile(r"^\d+ ms$"), timeout=CALL_TIMEOUT_MS)

    mute = page.get_by_role("button", name="Mute")
    mute.click()
    sync_api.expect(page.get_by_role("button", name="Unmute")).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Unmute").click()
    sync_api.expect(mute).to_have_attribute("aria-pressed", "false")

    conftest.ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(conftest.ARTIFACTS / "demo.png"), full_page=True)

    page.get_by_role("button", name="End call").click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-ended", "close_requested", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "idle")
    sync_api.expect(transcript).to_contain_text("call ended: close requested")
    sync_api.expect(page.get_by_role("button", name="Start call")).to_be_enabled()
    assert page.problems == []  # type: ignore[attr-defined]


def start_call(page: sync_api.Page, url: str, path: str = SOCKET) -> None:
    page.goto(url + path)
    start = page.get_by_role("button", name="Start call")
    sync_api.expect(start).to_be_enabled()  # enabled once /live/config has filled the settings
    start.click()


def test_a_full_pod_answers_server_busy_and_a_retry_on_the_same_socket_gets_in(
    browser: sync_api.Browser, one_slot_pod: str
) -> None:
    with conftest.watched_page(browser) as first, conftest.watched_page(browser) as second:
        start_call(first, one_slot_pod)
        sync_api.expect(first.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)

        start_call(second, one_slot_pod)
        sync_api.expect(second.get_by_role("alert")).to_contain_text("The pod is full", timeout=CALL_TIMEOUT_MS)
        sync_api.expect(second.locator("body")).to_have_attribute("data-call", "ready")  # socket kept open
        retry = second.get_by_role("button", name="Retry")
        sync_api.expect(retry).to_be_visible()

        first.get_by_role("button", name="End call").click()
        sync_api.expect(first.locator("body")).to_have_attribute("data-ended", "close_requested",
                                                                 timeout=CALL_TIMEOUT_MS)
        retry.click()
        sync_api.expect(second.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
        sync_api.expect(second.get_by_role("alert")).to_be_hidden()
        second.get_by_role("button", name="End call").click()
        sync_api.expect(second.locator("body")).to_have_attribute("data-ended", "close_requested",
                                                                  timeout=CALL_TIMEOUT_MS)
        assert first.problems == second.problems == []  # type: ignore[attr-defined]


def test_a_pod_that_needs_a_key_asks_for_it_names_a_wrong_one_and_takes_the_right_one(
    page: sync_api.Page, keyed_pod: str
) -> None:
    page.goto(keyed_pod + SOCKET)
    key = page.get_by_label("API key")
    sync_api.expect(key).to_be_visible()
    start = page.get_by_role("button", name="Start call")
    sync_api.expect(start).to_be_enabled()
    start.click()
    sync_api.expect(page.locator("#problem-text")).to_have_text("This pod needs an API key: enter it above.")

    key.fill("wrong-key")
    start.click()
    sync_api.expect(page.get_by_role("alert")).to_contain_text("check the API key", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "idle")

    key.fill("demo-key")
    start.click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.get_by_role("alert")).to_be_hidden()
    page.get_by_role("button", name="End call").click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-ended", "close_requested", timeout=CALL_TIMEOUT_MS)
    # the refused upgrade is the one console error the browser reports itself
    assert all("WebSocket connection" in p for p in page.problems)  # type: ignore[attr-defined]


def test_a_pod_without_a_key_shows_no_key_field(page: sync_api.Page, pod: str) -> None:
    page.goto(pod + "/")
    sync_api.expect(page.locator("#model")).not_to_have_text("…")
    sync_api.expect(page.get_by_label("API key")).to_be_hidden()
