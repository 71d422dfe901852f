"""Which transport the demo page calls on: the one `/live/config` says the server takes.

A core install has no `webrtc` extra, so its pods answer a WebRTC create with 501. The page used to
try WebRTC first and fall back to the socket, but the fallback closed the microphone it had just
opened: the first call went live and was never heard. Here a real pod (which has the extra) is
made to look like such a server from the browser's side: its `/live/config` without `webrtc`, or
its create answering 501 as a core install's does. `tests/test_first_day.py` runs the real thing on
a core-only install.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest
from playwright import sync_api

from liveplex.gptlive.server.webrtc import route as webrtc_route
from tests.demo.test_demo_page import CALL_TIMEOUT_MS, start_call

pytestmark = pytest.mark.browser


def heard(page: sync_api.Page) -> None:
    """The call is live on the socket, the microphone reaches the pod (its meter moves), the sim's
    words come back and so does its echo (the agent's meter moves)."""
    sync_api.expect(page.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.locator("#stat-transport")).to_have_text("WebSocket")
    page.wait_for_function("document.getElementById('mic-level').value > 0.3", timeout=CALL_TIMEOUT_MS)
    sync_api.expect(page.get_by_role("log", name="Agent transcript")).to_contain_text(
        "I hear you", timeout=CALL_TIMEOUT_MS)
    page.wait_for_function("document.getElementById('agent-level').value > 0.3", timeout=CALL_TIMEOUT_MS)
    page.get_by_role("button", name="End call").click()
    sync_api.expect(page.locator("body")).to_have_attribute("data-ended", "close_requested", timeout=CALL_TIMEOUT_MS)


def creates(page: sync_api.Page, answer: Callable[[sync_api.Route], None]) -> list[str]:
    """Route the page's WebRTC creates (`POST /v1/live/sessions`) to `answer`; the methods of every
    HTTP request to that path, in order."""
    seen: list[str] = []

    def handle(route: sync_api.Route) -> None:
        seen.append(route.request.method)
        answer(route) if route.request.method == "POST" else route.fallback()

    page.route("**/v1/live/sessions", handle)
    return seen


def test_a_server_without_webrtc_is_called_on_the_socket_from_the_first_click(page: sync_api.Page,
                                                                                pod: str) -> None:
    def without_webrtc(route: sync_api.Route) -> None:
        config = route.fetch().json()
        assert "webrtc" in config["transports"]  # this pod has the extra; the page must not see it
        config["transports"] = [t for t in config["transports"] if t != "webrtc"]
        route.fulfill(json=config)

    page.route("**/live/config", without_webrtc)
    posted = creates(page, lambda route: route.abort())
    start_call(page, pod, "/")
    heard(page)
    assert posted == []  # no WebRTC create was tried
    assert page.problems == []  # type: ignore[attr-defined]


def test_a_501_on_the_create_falls_back_to_the_socket_with_the_microphone_kept(page: sync_api.Page,
                                                                               pod: str) -> None:
    """A server that lists `webrtc` but answers 501 (a replica without the extra behind the same
    address) is called on the socket within the same click, and that first call is heard."""
    refusal = webrtc_route.NO_WEBRTC
    posted = creates(page, lambda route: route.fulfill(status=refusal[0], body=refusal[1],
                                                       content_type="application/json"))
    start_call(page, pod, "/")
    heard(page)
    assert posted == ["POST"]
    # the refused create is the one console error the browser reports itself
    assert all("501" in p for p in page.problems), page.problems  # type: ignore[attr-defined]


def test_live_config_lists_the_transports_of_this_install(pod: str) -> None:


    with urllib.request.urlopen(pod + "/live/config", timeout=5) as response:
        config = json.loads(response.read())
    assert config["transports"] == list(webrtc_route.TRANSPORTS) == ["websocket", "webrtc"]
