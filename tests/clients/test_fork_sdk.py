"""openai 3.63's forks against a gateway with a store (issue 45, docs/storage.md "Forks"):
`client.live.forks.connect` (the fork socket) and `client.live.sessions.fork` (a WebRTC call, whose
offer and answer are an aiortc caller's in this process), every event strictly the SDK's. Selected
with `-m clients` (the clients venv)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.clients.test_frameworks import run
from tests.support import platform, webrtc

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]


def test_the_sdk_forks_a_stored_call_over_its_socket_and_onto_a_webrtc_call(redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=(
            "--store-dir", str(tmp_path / "stored"), "--store-flush-s", "0.3")) as p:
        asyncio.run(_forks(p.gateway.base_url, tmp_path / "offer.sdp"))


async def _forks(base_url: str, offer_file: Path) -> None:
    out = await asyncio.to_thread(run, "fork_call.py", base_url)
    fork = out["fork"]
    assert fork["id"] != out["original"] and (fork["model"], fork["instructions"], fork["store"]) == (
        "gpt-live-1", "Be brief.", True)
    assert out["fork_reason"] == "close_requested" and out["fork_deltas"] > 8
    caller = webrtc.Caller()  # the stored call has ended: it forks all the same
    offer_file.write_text(await caller.offer())
    created = await asyncio.to_thread(run, "fork_call.py", base_url, "--webrtc", out["original"], str(offer_file))
    await caller.accept(created["sdp"])
    started, _ = await caller.until("session.started")
    assert started["session"]["id"] == created["id"] != out["original"] and started["session"]["store"] is False
    await caller.close()
