"""A moved or resumed call hears nothing of it: the next pod answers the start the gateway replays
to it as it answers any start (`session.started`, then the start's `info` notes), and none of that
reaches the caller, whatever kind of start it sent. Real sim pods (`--info-events`: every note a
start can draw) and a gateway over real Redis; the pods' side is `relaying`'s pure test."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from tests.gateway.test_moves import _metric
from tests.support import platform
from tests.support.clients import STARTS, STREAMED, StampedCall

NOTES = ("--info-events",)


@pytest.mark.parametrize("how", ["move", "resume"])
def test_a_moved_or_resumed_call_hears_its_start_notes_once(redis_url, tmp_path, how: str) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=NOTES) as p:
        async def scenario() -> list[StampedCall]:
            calls = [await StampedCall.start(p.gateway.ws_url, start) for start, _ in STARTS.values()]
            with platform.pod(redis_url, tmp_path, 1, NOTES):
                platform.eventually(lambda: p.stats()["pods"] == 2, "the gateway to see the second pod")
                await asyncio.sleep(1.0)  # a checkpoint of each call kept: a resume needs one
                heard = [len(call.arrivals) for call in calls]
                if how == "move":
                    await asyncio.to_thread(platform.get_json, p.pods[0][0].admin_root + "/drain?deadline_s=30")
                else:
                    os.kill(p.pods[0][1].pid, signal.SIGKILL)
                while any(len(call.arrivals) < n + 20 for call, n in zip(calls, heard, strict=True)):
                    await asyncio.sleep(0.05)  # every call heard from its new pod
                await asyncio.gather(*(call.stop(echo_s=0) for call in calls))  # no stamp is checked here
                return calls

        calls = asyncio.run(asyncio.wait_for(scenario(), 60))
        for (kind, (_, notes)), call in zip(STARTS.items(), calls, strict=True):
            told = [(e["type"], e.get("code")) for e in call.others if e["type"] not in STREAMED]
            assert told == [*(("info", code) for code in notes), ("session.closed", None)], (kind, told)
        moves = _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total")
        result = "moved" if how == "move" else "resumed"
        assert moves[f'liveplex_gateway_session_moves_total{{result="{result}"}}'] == len(STARTS)
