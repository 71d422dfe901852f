"""The official SDK's reconnect behind a real TCP load balancer, in the default suite (issue 42): the
`openai` SDK of this venv (3.51 has `on_reconnecting`, as 3.63 does) holds one call through Debian's
HAProxy (tests/support/haproxy.py) over two gateways and a sim pod; the gateway carrying it is
SIGKILLed, and the SDK's own reconnect, handed `?session_id=` and `last_event_id` by the handler
docs/continuity.md shows, continues the call through the other. The same session, no `error`, no
second `session.started`, every server event once and none missing (the usage events, one per
`USAGE_MS` of session time, come in an unbroken row), and its audio back.

The clients suite (`-m clients`, tests/clients/test_reconnect.py) runs many calls, a rolling restart
and the pinned 3.63 in its own venv; this is the one short path every run keeps (about 6 s).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import openai
import pytest
from openai.types.websocket_reconnection import ReconnectingEvent, ReconnectingOverrides

from tests.support import clients, haproxy, platform, pods

pytestmark = pytest.mark.timeout(120)

KEY = "key-one"
USAGE_MS = 200
"""A usage event every 200 ms of session time: the drop's half second spans two or three, so one
lost (or sent twice) shows as a hole (a repeat) in their row."""
HEARD = 12
"""Audio deltas heard before the kill, and again after the reconnect (about a second each)."""


@dataclass
class Call:
    """What one SDK call saw: its server events but the audio, each reconnect, its audio deltas."""

    session_id: str | None = None
    last_event_id: str | None = None
    events: list[dict[str, object]] = field(default_factory=list)
    reconnects: list[tuple[int, int]] = field(default_factory=list)
    """(attempt, close code) as the SDK told the handler."""
    deltas: list[int] = field(default_factory=lambda: [0])
    """Audio deltas heard on each socket the SDK held, in order."""

    def on_reconnecting(self, event: ReconnectingEvent) -> ReconnectingOverrides:
        """The handler of docs/continuity.md, with the last event seen (none lost, none twice)."""
        self.reconnects.append((event.attempt, event.close_code))
        self.deltas.append(0)
        query = {"session_id": self.session_id}
        if self.last_event_id is not None:
            query["last_event_id"] = self.last_event_id
        return {"extra_query": query}


def test_an_sdk_call_goes_on_through_the_balancer_when_its_gateway_is_killed(redis_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY}\n")
    auth = ("--api-key-file", str(keys))
    with platform.platform(redis_url, tmp_path, n_pods=1, pod_flags=("--usage-period-ms", str(USAGE_MS)),
                           gateway_flags=auth) as running, \
            pods.subprocess_pod("--redis-url", redis_url, "--pool", platform.POOL, *auth,
                                log=tmp_path / "gateway-b.log", command="gateway") as (second, _):
        platform.eventually(lambda: platform.get_json(second.admin_root + "/live/stats")["pods"] == 1,  # type: ignore[index]
                            "the second gateway to see the pod")
        with haproxy.balancer(tmp_path, [running.gateway.address, second.address]) as lb:
            lb.set_state("g1", "maint")  # the call goes through g0
            call = asyncio.run(_call(lb, running.gateway_process))
    kinds = [e["type"] for e in call.events]
    assert "error" not in kinds, call.events
    assert kinds.count("session.started") == 1 and kinds[0] == "session.started"
    assert kinds[-1] == "session.closed" and call.events[-1]["id"] == call.session_id
    ids = [e["event_id"] for e in call.events]
    assert len(ids) == len(set(ids)), "a server event came twice"
    usage = [e["seconds"] for e in call.events if e["type"] == "session.usage.updated"]
    steps = [round(b - a, 3) for a, b in zip(usage, usage[1:], strict=False)]  # type: ignore[operator]
    assert steps and all(abs(s - USAGE_MS / 1000) < 0.09 for s in steps), f"usage events missing or twice: {usage}"
    assert call.reconnects == [(1, 1006)]  # one reconnect, after a connection that died without a close frame
    assert call.deltas[0] >= HEARD and call.deltas[1] >= HEARD


async def _call(lb: haproxy.Balancer, carrier: subprocess.Popen[bytes]) -> Call:
    """One SDK call streaming loud audio in real time; once it has heard `HEARD` deltas, g1 takes
    connections and g0 (`carrier`) is SIGKILLed; once it hears `HEARD` more, it closes."""
    call = Call()
    client = openai.AsyncOpenAI(base_url=lb.url, api_key=KEY)
    async with client.live.connect(on_reconnecting=call.on_reconnecting) as conn:
        await conn.session.start(session={"model": "gpt-live-1"})

        async def speak() -> None:
            while True:
                await conn.session.input_audio.append(audio=clients.LOUD)
                await asyncio.sleep(0.08)

        speaking: asyncio.Task[None] | None = None
        async with asyncio.timeout(30):
            async for event in conn:
                if event.type == "session.output_audio.delta":
                    call.deltas[-1] += 1
                    if call.deltas == [HEARD]:
                        lb.set_state("g1", "ready")
                        await asyncio.to_thread(lb.wait_states, {"g1": "UP"})
                        carrier.send_signal(signal.SIGKILL)
                    elif len(call.deltas) == 2 and call.deltas[1] == HEARD and speaking is not None:
                        speaking.cancel()
                        await conn.session.close()
                    continue
                seen: dict[str, object] = {"type": event.type, "event_id": event.event_id}
                call.last_event_id = event.event_id
                if event.type == "session.started":
                    call.session_id = event.session.id
                    speaking = asyncio.create_task(speak())
                elif event.type == "session.usage.updated":
                    seen["seconds"] = event.usage.seconds
                elif event.type == "session.closed":
                    call.events.append({**seen, "id": event.session.id})
                    break
                call.events.append(seen)
    return call
