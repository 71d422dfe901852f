"""Check 44: forks over the fork socket (openai 3.63 `client.live.forks.connect`; docs/storage.md
"Forks").

A stored session's fork socket, `/v1/live/sessions/{id}/fork`, takes a `session.start` whose
session holds only a fork's overrides (`ForkSessionConfig`): `{}` starts a new session, with a new
id and the stored session's model, instructions and `store`, whose audio flows as any session's.
An override a fork may not carry (`model`: a fork inherits it) is refused by name,
`unsupported_parameter` on `session.model`, and the socket stays open for a good start, as after
any refused start. An unknown id, and a session another API key stored, are one `error`
`session_not_found` on `session_id`, then close 1008, so another key learns nothing of the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets

import websockets

from liveplex.conformance import signals
from liveplex.conformance.checklist import Check, expect
from liveplex.conformance.checks.stored import stored_or_skip
from liveplex.conformance.context import Context
from liveplex.conformance.wire import Json, Wire, brief

SPOKEN_MS = 800
"""The stored call's caller audio, and the fork's, at real-time pace."""
INSTRUCTIONS = "Answer in one short sentence."
"""The stored call's instructions: the fork must inherit them."""
FORK_PATH = "/live/sessions/{session_id}/fork"
"""The fork socket, under the `/v1` base (the SDK's `forks.connect`)."""
REFUSED_OVERRIDE = {"model": "x"}
"""An override GPT-Live does not allow on a fork: refused by name on `session.model`."""


def _still_starting(event: Json) -> bool:
    """The server's refusal of a fork whose stored record holds nothing yet (docs/storage.md
    "Forks": `invalid_value` on `session_id`): the call's last chunk is written as it ends."""
    body = event.get("error")
    return isinstance(body, dict) and (body.get("code"), body.get("param")) == ("invalid_value", "session_id")


async def _refuse_override(w: Wire) -> Json:
    """Send the start with `REFUSED_OVERRIDE` on a fork socket just opened: the next reply, which
    is the server's own refusal when it refused the fork as the socket opened."""
    with contextlib.suppress(websockets.ConnectionClosed):  # refused as it opened: its error is read next
        await w.send({"type": "session.start", "event_id": "override", "session": REFUSED_OVERRIDE})
    return await w.next_event()


async def refused_fork(ctx: Context, session_id: str, bearer: str, what: str) -> None:
    """`what`'s fork socket is told `session_not_found` on `session_id`, then closed 1008; raises
    `websockets.InvalidStatus` where the server serves no fork socket (it refused the upgrade)."""
    async with await ctx.wire(bearer=bearer, path=FORK_PATH.format(session_id=session_id)) as w:
        await w.expect_error("session_not_found", "session_id")
        code = await w.ended(ctx.options.timeout_s)
    expect(code == 1008, f"{what}: the fork socket closed {code} after session_not_found, expected 1008")


async def _fork(ctx: Context, stored: Json) -> tuple[Json, int]:
    """Fork `stored` over its fork socket: the override refused, then `{}` started and spoken to;
    the fork's resource and the audio deltas it sent. Opened again while the server says the
    stored session is still starting, up to `--timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ctx.options.timeout_s
    path = FORK_PATH.format(session_id=stored["id"])
    while True:
        async with await ctx.wire(path=path) as w:
            refused = await _refuse_override(w)
            if _still_starting(refused) and loop.time() < deadline:
                await asyncio.sleep(0.2)
                continue
            body = refused.get("error")
            expect(isinstance(body, dict) and refused.get("client_event_id") == "override"
                   and (body.get("code"), body.get("param")) == ("unsupported_parameter", "session.model"),
                   f"a fork's start with {REFUSED_OVERRIDE} answered {brief(refused)}, expected "
                   "unsupported_parameter on session.model")
            await w.send({"type": "session.start", "event_id": "fork", "session": {}})  # the stored settings
            started = await w.expect("session.started", client_event_id="fork")
            await w.play(signals.speech(SPOKEN_MS))
            await w.close_session()
        resource = started["session"]
        assert isinstance(resource, dict)
        return resource, len(w.deltas)


async def fork(ctx: Context) -> str:
    async with await ctx.wire() as w:
        stored = await stored_or_skip(ctx, w, INSTRUCTIONS)
        await w.play(signals.speech(SPOKEN_MS))
        await w.close_session()
    forked, deltas = await _fork(ctx, stored)
    expect(forked.get("id") not in (None, stored.get("id")),
           f"the fork's session.started has id {forked.get('id')!r}; the stored session's is {stored.get('id')!r}")
    inherited = {key: forked.get(key) for key in ("model", "instructions", "store")}
    expect(inherited == {key: stored.get(key) for key in inherited},
           f"the fork started with {inherited}; the stored session has {stored.get('model')!r}, "
           f"{stored.get('instructions')!r}, store {stored.get('store')!r}")
    least = signals.frames_in(SPOKEN_MS) // 2
    expect(deltas >= least, f"the fork sent {deltas} audio deltas in {SPOKEN_MS} ms of audio, expected {least}+")
    await refused_fork(ctx, f"sess_{secrets.token_hex(12)}", ctx.options.bearer, "an unknown id")
    other = ctx.options.other_api_key
    if other is not None:
        await refused_fork(ctx, str(stored["id"]), other, "another key")
    done = (f"forked as {forked.get('id')} with the stored settings, {deltas} deltas; the model override "
            "refused on an open socket; an unknown id is session_not_found, close 1008")
    return done + ("; so is another key's" if other is not None else "; pass --other-api-key for another key's")


CHECKS = (Check(44, "fork", fork, seconds=4.0),)
