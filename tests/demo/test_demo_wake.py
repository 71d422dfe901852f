"""The demo page's "wake on speech" (issue 43): a WebRTC call whose create carries `wake_policy` and
`idle_timeout_s` waits paused, out of the engine, while the microphone is quiet, and shows
"listening" once real speech wakes it; a server that cannot pause gets no such toggle."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import numpy as np
import pytest
from playwright import sync_api

from liveplex.bench import audio
from tests.conformance import servers
from tests.demo import conftest
from tests.demo.test_demo_page import CALL_TIMEOUT_MS

pytestmark = pytest.mark.browser

QUIET_S = 3.0
"""Silence before the microphone speaks: the call is live and waiting well before it ends."""


@pytest.fixture(scope="module")
def quiet_then_speech(
    browser: sync_api.Browser, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[sync_api.Browser]:
    """A browser whose microphone is silent for `QUIET_S`, then says 3 s of the shipped recording:
    real speech, which Silero VAD wakes on (the package browser's synthetic glide need not)."""
    speech = audio.read_wav(audio.recording_path(), 24_000)[:3 * 24_000].astype(np.float64)
    up = np.interp(np.arange(len(speech) * 2) / 2, np.arange(len(speech)), speech)  # 24 -> 48 kHz
    samples = np.concatenate([np.zeros(int(QUIET_S * conftest.SPEECH_RATE)), up]).astype(np.int16)
    wav = conftest.write_wav(tmp_path_factory.mktemp("mic") / "quiet-then-speech.wav", samples)
    other = conftest.launch(browser.browser_type, wav)
    yield other
    other.close()


_HISTORY = """() => { window.engineStates = [];
  const seen = (state) => state && window.engineStates.at(-1)?.[0] !== state
    && window.engineStates.push([state, performance.now()]);
  new MutationObserver((records) => {  // one call for changes made in one task: each record's old value
    records.slice(1).forEach((r) => seen(r.oldValue));
    seen(document.body.dataset.engine);
  }).observe(document.body, { attributes: true, attributeFilter: ['data-engine'], attributeOldValue: true }); }"""
"""Every state the page showed, in order, with when (ms): a brief one cannot slip between two polls."""


def test_a_wake_on_speech_call_waits_paused_until_the_microphone_speaks(
    quiet_then_speech: sync_api.Browser, pod: str
) -> None:
    with conftest.watched_page(quiet_then_speech) as page:
        page.goto(pod + "/")
        start = page.get_by_role("button", name="Start call")
        sync_api.expect(start).to_be_enabled()  # once /live/config has filled the settings
        page.get_by_label("Wake on speech").check()
        page.evaluate(_HISTORY)
        start.click()
        sync_api.expect(page.locator("body")).to_have_attribute("data-call", "live", timeout=CALL_TIMEOUT_MS)
        sync_api.expect(page.locator("#stat-transport")).to_have_text("WebRTC")
        sync_api.expect(page.locator("body")).to_have_attribute("data-engine", "listening", timeout=CALL_TIMEOUT_MS)
        sync_api.expect(page.locator("#engine-state")).to_have_text("listening")
        (paused, paused_at), (listening, listening_at) = page.evaluate("window.engineStates")
        assert (paused, listening) == ("paused", "listening")
        assert listening_at - paused_at > 1000  # the quiet held it: it woke on the speech, not at once
        page.get_by_role("button", name="End call").click()
        sync_api.expect(page.locator("body")).to_have_attribute("data-ended", "close_requested",
                                                                timeout=CALL_TIMEOUT_MS)
        assert page.problems == []  # type: ignore[attr-defined]


def test_no_toggle_where_the_server_cannot_pause(page: sync_api.Page, tmp_path: pathlib.Path) -> None:
    with servers.serve("--max-paused", "0", log=tmp_path / "pod.log") as base_url:
        page.goto(base_url.removesuffix("/v1") + "/")
        sync_api.expect(page.get_by_role("button", name="Start call")).to_be_enabled()
        sync_api.expect(page.locator("#wake-field")).to_be_hidden()
