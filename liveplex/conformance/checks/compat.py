"""Checks 41-42: what GPT-Live frameworks send (LiveKit Agents, Pipecat, openai 3.57; issue 21).

LiveKit reconnects with the conversation so far in `session.input` and starts with a `responses`
delegation by default; Pipecat sends chat history as `session.input` and an opening instruction as
`session.commentary.append`; openai 3.57 declares `safety_identifier` and `gpt-live-1.1`.
"""

from __future__ import annotations

import asyncio

from liveplex.conformance.checklist import Check, expect
from liveplex.conformance.checks.start import MODEL, accepted, refused_sessions
from liveplex.conformance.checks.stream import transcript
from liveplex.conformance.context import Context
from liveplex.conformance.wire import Wire, brief

HISTORY = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "The caller is Ada."}]},
    {"role": "user", "id": "item_1", "status": "completed", "content": [{"text": "Hi, who am I?"}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "You are Ada."}]},
]
"""openai 3.57's `InitialItem` shapes, optional fields both given and left out."""
RESPONSES = {"type": "responses", "responses": {"model": "gpt-5", "tools": [{"type": "web_search"}]}}
SAID = "Welcome back to liveplex"


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


async def _infos(ctx: Context, session: dict[str, object]) -> tuple[dict[str, object], list[str]]:
    """Start `session`, then close it; the resource and the `info` codes sent after the start."""
    async with await ctx.wire() as w:
        started = await w.start(session)
        await w.close_session()
    codes = [str(r.event.get("code")) for r in w.log if r.event.get("type") == "info"]
    resource = started["session"]
    assert isinstance(resource, dict)
    return resource, codes


async def client_startup(ctx: Context) -> str:
    resource, codes = await _infos(ctx, {**MODEL, "input": HISTORY, "delegation": RESPONSES,
                                         "safety_identifier": "user-42"})
    expect(resource.get("delegation") == RESPONSES, f"delegation should echo as sent: {brief(resource)}")
    expect(resource.get("safety_identifier") == "user-42", f"safety_identifier should echo: {brief(resource)}")
    expect("input" not in resource, "session.input should never be echoed")
    expect("delegation_unused" in codes, f"a responses delegation needs info delegation_unused, got {codes}")
    done = ["history, responses delegation and safety_identifier accepted"]
    limit = ctx.server.config.get("max_instructions_chars")
    if isinstance(limit, int) and limit > 0:
        many = [_user(f"message {i}: " + "x" * 40) for i in range(limit // 40 + 2)]
        _, codes = await _infos(ctx, {**MODEL, "input": many})
        expect("input_truncated" in codes, f"{len(many)} messages over a {limit}-char prompt: info {codes}")
        done.append("over-long history truncated with info input_truncated")
    if "gpt-live-1.1" in ctx.server.models:
        await accepted(ctx, {"model": "gpt-live-1.1"})
        done.append("gpt-live-1.1 served")
    await refused_sessions(ctx, [
        ({**MODEL, "input": [*HISTORY, {"role": "tool", "content": []}]}, "invalid_value", "session.input[3].role"),
        ({**MODEL, "input": [_user("a"), {"role": "user", "content": [{"type": "output_text", "text": "b"}]}]},
         "invalid_value", "session.input[1].content[0].type"),
        ({**MODEL, "input": [_user("a")] * 129}, "array_above_max_length", "session.input"),
        ({**MODEL, "safety_identifier": 7}, "invalid_type", "session.safety_identifier"),
        ({**MODEL, "delegation": {"type": "responses"}}, "missing_required_parameter",
         "session.delegation.responses"),
    ])
    return "; ".join(done) + "; bad items refused at their path"


async def _said(w: Wire, text: str, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while text not in transcript(w) and loop.time() < deadline:
        await w.recv(max(0.0, deadline - loop.time()))


async def commentary(ctx: Context) -> str:
    async with await ctx.wire() as w:
        await w.start()
        await w.send({"type": "session.commentary.append", "event_id": "k1", "content": SAID, "delegation_id": None})
        ack = await w.expect("session.commentary.appended", client_event_id="k1")
        start, end = ack.get("start_ms"), ack.get("end_ms")
        expect(isinstance(start, int) and start == end and start % 80 == 0,
               f"the ack should sit on the timeline (start_ms == end_ms, a frame boundary): {brief(ack)}")
        await w.send({"type": "session.commentary.append", "event_id": "k2", "content": SAID, "delegation_id": "d1"})
        await w.expect_error("invalid_value", "delegation_id", client_event_id="k2")
        if ctx.server.is_sim:
            await _said(w, SAID, 3.0)
            expect(SAID in transcript(w), f"(sim) the commentary should show as transcript: {transcript(w)!r}")
        await w.close_session()
    return "acked at " + f"{start} ms" + ("; said as the sim's transcript" if ctx.server.is_sim else "")


CHECKS = (
    Check(41, "client-startup", client_startup, seconds=3.0),
    Check(42, "commentary", commentary, seconds=3.0),
)
