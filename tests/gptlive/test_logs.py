"""A server's logs (issue 11, item 7): JSON lines on stderr and nothing else, one line per session
end, `stopped` on SIGTERM as on SIGINT, and no uvicorn noise for refused upgrades."""

from __future__ import annotations

import asyncio
import json
import logging
import signal

import pytest
import websockets

from tests.gptlive.test_socket import LOUD, START, send, until
from tests.support import hostile, pods

pytestmark = pytest.mark.timeout(60)


async def test_refused_upgrades_of_other_paths_log_nothing(caplog) -> None:
    """Every 404 upgrade probe logged `ASGI callable returned without completing handshake`."""
    caplog.set_level(logging.INFO, logger="uvicorn")
    async with pods.in_process() as running:
        for path in ("/nope", "/v1/live/sessions/x/attach"):
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(f"ws://{running.address}{path}")
            assert refused.value.response.status_code == 404
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_a_pod_logs_json_lines_one_per_session_end_and_stopped_whatever_the_signal(tmp_path, stop) -> None:
    out, err = tmp_path / "out.log", tmp_path / "err.log"
    with pods.subprocess_pod(log=out, stderr=err) as (running, proc):
        async with websockets.connect(running.ws_url) as ws:
            await send(ws, START)
            started, _ = await until(ws, "session.started")
            await send(ws, {"type": "session.input_audio.append", "audio": LOUD})
            await send(ws, {"type": "session.close"})
            closed, _ = await until(ws, "session.closed")
        with pytest.raises(websockets.InvalidStatus):
            await websockets.connect(f"ws://{running.address}/nope")
        garbage = await hostile.tcp(running.address)  # uvicorn itself warns about this one
        await asyncio.get_running_loop().sock_sendall(garbage, b"\x16\x03\x01 not http\r\n\r\n")
        assert await hostile.ended(garbage, 5)
        garbage.close()
        proc.send_signal(stop)
        assert proc.wait(timeout=30) in (0, -stop, 128 + stop)
    lines = [json.loads(line) for line in err.read_text().splitlines()]  # every line is JSON
    assert [(line["logger"], line["msg"]) for line in lines if line["level"] in ("warning", "error")] == [
        ("uvicorn.error", "Invalid HTTP request received.")]
    (ended,) = [line for line in lines if line["msg"] == "session ended"]
    assert {k: ended[k] for k in ("session_id", "reason", "seconds")} == {
        "session_id": started["session"]["id"], "reason": "close_requested", "seconds": closed["usage"]["seconds"]}
    assert ended["frames"] == round(ended["seconds"] / 0.08) and ended["underruns"] >= 0
    assert lines[0]["msg"] == "listening" and lines[-1]["msg"] == "stopped"
    assert lines[0]["frozen_objects"] > 10_000  # the startup heap is out of the collector's view
    assert lines[-1]["signals"] == [stop.name]
    assert "GPT-Live   ws://" in out.read_text()  # the banner, for people, on stdout
