"""openai 3.63's stored-session methods against a gateway with a store (issue 45, docs/storage.md):
`store: true` echoed, `sessions.hangup` ending the call with `close_requested`, and
`sessions.download_recording` returning a WAV a reader opens: two channels at 24 kHz, as long as
the call (every frame the gateway relayed). Selected with `-m clients` (the clients venv)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.test_frameworks import run
from tests.support import platform

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]


def test_the_sdks_stored_call_is_hung_up_and_its_recording_downloaded(redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=(
            "--store-dir", str(tmp_path / "stored"), "--store-flush-s", "0.5")) as p:
        out = run("stored_call.py", p.gateway.base_url, "2")
    assert out["store"] is True and out["reason"] == "close_requested"
    wav = out["wav"]
    assert (wav["channels"], wav["rate"], wav["content_type"]) == (2, 24_000, "audio/wav")
    assert wav["frames"] == out["deltas"] * 1920 >= 2 / 0.08 * 1920 * 0.8
