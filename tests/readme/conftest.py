"""Chromium with a fake microphone, as the demo page's own tests have it (package-scoped there and
here: Playwright's sync API keeps an event loop on the main thread while it is open)."""

from tests.demo.conftest import browser, speech_wav  # noqa: F401
