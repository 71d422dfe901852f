"""Fixtures for the demo page tests: headless Debian Chromium with a fake microphone, and a pod."""

from __future__ import annotations

import contextlib
import pathlib
import wave
from collections.abc import Iterator

import numpy as np
import pytest
from playwright import sync_api

from tests.conformance import servers

CHROMIUM = pathlib.Path("/usr/bin/chromium")
STATIC = pathlib.Path(__file__).resolve().parents[2] / "liveplex" / "gptlive" / "static"
ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "artifacts"

SPEECH_RATE = 48_000
"""Hz of the fake microphone's file: Chrome's fake capture device reads it at its own rate."""


def _speech(seconds: float, rate: int) -> np.ndarray:
    """Loud, voiced, speech-like audio: a gliding harmonic tone under a syllable envelope.

    Not a steady tone, so WebRTC's noise suppressor lets it through; its quietest syllable dips
    stay far above the echo engine's -40 dBFS loudness threshold.
    """
    t = np.arange(int(seconds * rate)) / rate
    f0 = 150 + 30 * np.sin(2 * np.pi * 0.7 * t)  # pitch glides between 120 and 180 Hz
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum(np.sin(h * phase) / h for h in range(1, 12))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.5 * t)  # ~4 syllables a second
    signal = voiced * envelope
    return (0.6 * signal / np.max(np.abs(signal)) * 32767).astype(np.int16)


@pytest.fixture(scope="session")
def speech_wav(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return write_wav(tmp_path_factory.mktemp("mic") / "speech.wav", _speech(4.0, SPEECH_RATE))


# Package scope, not session: Playwright's sync API keeps an event loop running on the main
# thread while it is open, and every asyncio test collected after tests/demo would then fail
# with "cannot be called from a running event loop".
@pytest.fixture(scope="package")
def browser(speech_wav: pathlib.Path) -> Iterator[sync_api.Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing. The default suite needs it: `bash scripts/test` installs it "
                    "(apt-get install chromium fonts-dejavu-core); to run without it, deselect these "
                    "tests with -m 'not browser'.")
    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright.chromium, speech_wav)
        yield browser
        browser.close()


def launch(kind: sync_api.BrowserType, microphone: pathlib.Path) -> sync_api.Browser:
    """Headless Chromium whose fake microphone plays `microphone` (a WAV, looped). A test that needs
    another microphone launches its own from the package browser's `browser_type`: Playwright's sync
    API runs one instance at a time."""
    return kind.launch(
        executable_path=str(CHROMIUM),
        args=[
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={microphone}",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )


def write_wav(path: pathlib.Path, samples: np.ndarray, rate: int = SPEECH_RATE) -> pathlib.Path:
    """`samples` (int16, mono) as a WAV at `rate` Hz: a fake microphone's file."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.astype("<i2").tobytes())
    return path


@contextlib.contextmanager
def watched_page(browser: sync_api.Browser) -> Iterator[sync_api.Page]:
    """A fresh page that records console errors and uncaught exceptions in `page.problems`."""
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.problems = problems  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def page(browser: sync_api.Browser) -> Iterator[sync_api.Page]:
    with watched_page(browser) as page:
        yield page


@pytest.fixture(scope="module")
def modules(browser: sync_api.Browser) -> Iterator[sync_api.Page]:
    """A page on a fake secure origin (http://localhost) serving the static directory from disk.

    The page's pure modules then run in the real browser with no server; module-scoped so that
    Hypothesis examples reuse one page.
    """
    def serve(route: sync_api.Route) -> None:
        url = route.request.url
        path = STATIC / url.removeprefix("http://localhost/static/")
        if url == "http://localhost/":
            route.fulfill(body="<!doctype html><title>modules</title>", content_type="text/html")
        elif path.is_file() and path.parent == STATIC:
            route.fulfill(path=str(path), content_type="text/javascript")
        else:
            route.fulfill(status=404)

    with watched_page(browser) as page:
        page.route("http://localhost/**", serve)
        page.goto("http://localhost/")
        yield page
        assert page.problems == []  # type: ignore[attr-defined]


@pytest.fixture
def pod(tmp_path: pathlib.Path) -> Iterator[str]:
    """A real `liveplex serve --engine sim` on a free port; yields its root URL (the demo page)."""
    with servers.serve(log=tmp_path / "pod.log") as base_url:
        yield base_url.removesuffix("/v1")


@pytest.fixture
def one_slot_pod(tmp_path: pathlib.Path) -> Iterator[str]:
    """The same with room for one session, so a second caller meets `server_busy`."""
    with servers.serve("--max-sessions", "1", log=tmp_path / "pod.log") as base_url:
        yield base_url.removesuffix("/v1")


@pytest.fixture
def keyed_pod(tmp_path: pathlib.Path) -> Iterator[str]:
    """A pod that needs the API key `demo-key` (given in a file, not on the command line)."""
    keys = tmp_path / "keys"
    keys.write_text("demo-key\n")
    with servers.serve("--api-key-file", str(keys), log=tmp_path / "pod.log") as base_url:
        yield base_url.removesuffix("/v1")
