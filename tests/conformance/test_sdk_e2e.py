"""The official SDK holds a session against `liveplex serve` (issue 2's end-to-end test)."""

from __future__ import annotations

import asyncio

import pytest

from liveplex.conformance import signals
from tests.conformance import servers
from tests.support import clients

pytestmark = [pytest.mark.timeout(120)]

def test_the_async_sdk_streams_speech_and_hears_the_echo(tmp_path):
    with servers.serve(log=tmp_path / "serve.log") as base:
        deltas, words, reason = asyncio.run(clients.sdk_call(base))
    assert reason == "close_requested"
    assert {len(d) for d in deltas} == {3840}
    assert len(deltas) >= 0.7 * clients.SPEECH_MS / signals.FRAME_MS
    # Contiguous: the echo of the speech comes back as one unbroken run of loud frames.
    loud = [i for i, d in enumerate(deltas) if any(d)]
    assert loud and loud == list(range(loud[0], loud[-1] + 1))
    assert words.startswith("I hear you")
