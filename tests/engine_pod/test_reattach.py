"""A PersonaPlex call outlives its gateway (issue 42, "the tiny PersonaPlex behind it"): the
gateway carrying the call is SIGKILLed, the caller re-attaches through the other gateway with the
same session id, and the session's model state carried on.

Real parts: Redis, one `serve --engine personaplex` pod on the tiny checkpoint (CPU), two gateways.

The check is the strongest deterministic one: the audio the model itself makes. With `--greedy`
draws and a caller who sends no audio (the model hears silence on a socket and parked alike), a
session's audio is a function of its model state alone, frame by frame (the tiny model's frames
are all distinct: noise from random weights). A twin session, run first on the same pod alone
(batch of one, as the call is), is the reference: the audio heard before the kill is the twin's
first frames, and the audio heard after the re-attach is exactly the twin's run from a frame past
those (the frames played while parked are not replayed). A session restarted, prefilled again, or
fed anything else after the kill would match the twin from its start, or nowhere.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
import websockets

from tests.engine_pod import tiny_pod
from tests.support import clients, platform, pods

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # ~13 s: the default suite is at its limit

BEFORE, AFTER = 10, 10
"""Audio frames heard before the kill and after the re-attach (0.8 s each)."""
TWIN = BEFORE + AFTER + 25
"""The twin's frames: the call's and its gap (0.5 s before the re-attach, which takes about 0.1 s
more here: 6 frames; up to 25 are allowed for a loaded machine)."""




def test_a_personaplex_session_goes_on_with_its_model_state_through_another_gateway(
        tiny_dir: Path, redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=tiny_pod.flags(tiny_dir)) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL,
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        platform.eventually(lambda: platform.get_json(second.admin_root + "/live/stats")["pods"] == 1,  # type: ignore[index]
                            "the second gateway to see the pod")
        twin, before, after = asyncio.run(_calls(running, second))
    assert len(set(twin)) == TWIN  # every frame tells where in the session it is
    assert before == twin[:BEFORE]
    at = twin.index(after[0])
    assert after == twin[at:at + AFTER]  # the same model state, stepped on while parked
    assert at > BEFORE  # not restarted: it went on past what was heard, through the gap


async def _calls(running: platform.Platform, second: pods.Running) -> tuple[list[str], list[str], list[str]]:
    ws, _ = await clients.started(running.gateway.ws_url)
    twin = await tiny_pod.audio(ws, TWIN)
    await ws.close()
    await asyncio.to_thread(platform.eventually, lambda: running.pod_sessions() == [0], "the twin to end")

    ws, started = await clients.started(running.gateway.ws_url)
    before = await tiny_pod.audio(ws, BEFORE)
    running.gateway_process.send_signal(signal.SIGKILL)  # the gateway carrying the call dies
    await asyncio.sleep(0.5)
    query = f"?session_id={started['session']['id']}"
    again = await websockets.connect(second.ws_url + query, max_queue=None)
    after = await tiny_pod.audio(again, AFTER)
    await again.close()
    return twin, before, after
