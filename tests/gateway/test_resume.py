"""A call whose pod is killed (SIGKILL) goes on on another pod from the checkpoints the gateway
kept: the caller hears a short silence, never an error, and the call ends as it asks. Real sim pods
and a gateway over real Redis; stamped frames show the echo resume."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from tests.gateway.test_moves import _metric
from tests.support import platform
from tests.support.clients import STREAMED, StampedCall


def test_a_call_whose_pod_is_killed_resumes_on_another_after_a_short_silence(redis_url, tmp_path) -> None:
    with platform.platform(redis_url, tmp_path) as p:
        async def scenario() -> tuple[StampedCall, float, float]:
            call = await StampedCall.start(p.gateway.ws_url)
            platform.eventually(lambda: sorted(p.pod_sessions()) == [0, 1], "the call on one pod")
            victim = p.pods[p.pod_sessions().index(1)][1]
            await asyncio.sleep(1.5)
            killed = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            heard = len(call.stamps)
            while len(call.stamps) <= heard:  # the echo of a frame sent after the kill
                await asyncio.sleep(0.01)
                assert time.monotonic() - killed < 10, "no audio after the kill"
            back = call.arrivals[-1] - killed
            await asyncio.sleep(1.5)
            await call.stop()
            return call, killed, back

        call, _, back = asyncio.run(scenario())
        told = [e["type"] for e in call.others if e["type"] not in STREAMED]
        assert told == ["session.closed"] and call.others[-1]["reason"] == "close_requested", call.others[-3:]
        assert call.others[-1]["session"]["id"] == call.session_id
        # the frames held while the call was between pods reach the new pod: the echo runs to the end
        assert call.stamps[-1] == call.sent - 1
        assert call.stamps == sorted(set(call.stamps))  # nothing heard twice or out of order
        moves = _metric(p.gateway.admin_root, "liveplex_gateway_session_moves_total")
        assert moves['liveplex_gateway_session_moves_total{result="resumed"}'] == 1.0
        print(f"audio back {back * 1000:.0f} ms after the kill; "
              f"{call.sent - len(call.stamps)} of {call.sent} frames never echoed")
