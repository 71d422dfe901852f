"""Checks 1-3: the upgrade, auth, and a silent client (gpt-live §2)."""

from __future__ import annotations

import asyncio
import json
import secrets

import websockets

from liveplex.conformance.checklist import Check, Failed, expect
from liveplex.conformance.checks.forks import FORK_PATH, refused_fork
from liveplex.conformance.context import Context
from liveplex.gptlive import urls

QUIET_S = 2.0
"""gpt-live §14.3: a silent client receives nothing for 2 s."""


async def _refused_status(ctx: Context, url: str, bearer: str | None = "") -> tuple[int, bytes]:
    """Attempt an upgrade that must be refused; its HTTP status and body."""
    try:
        ws = await websockets.connect(url, additional_headers=ctx.headers(bearer), compression=None,
                                      user_agent_header=None, open_timeout=ctx.options.timeout_s)
    except websockets.InvalidStatus as exc:
        return exc.response.status_code, exc.response.body or b""
    await ws.close()
    raise Failed(f"upgrade to {url} succeeded; it should have been refused")


def _error_code(body: bytes) -> object:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc.get("error", {}).get("code") if isinstance(doc, dict) and isinstance(doc.get("error"), dict) else None


async def upgrade(ctx: Context) -> str:
    async with await ctx.wire() as w:
        response = w.ws.response
        expect(response is not None and response.status_code == 101, "upgrade status is not 101")
        expect(w.ws.subprotocol is None, f"server chose a subprotocol: {w.ws.subprotocol!r}")
        assert response is not None  # `expect` raised otherwise
        extensions = response.headers.get("Sec-WebSocket-Extensions")
        expect(extensions is None, f"server negotiated extensions: {extensions!r}")
    base = ctx.options.base_url
    # a server with WebRTC calls serves sidebands: an attach to a call it does not hold is `session_not_found`
    suffix = "/live/sessions/x/attach"
    status, body = await _refused_status(ctx, urls.ws_url(base, suffix))
    _expect_404(suffix, status, body, ("unsupported_endpoint", "session_not_found"))
    status, _ = await _refused_status(ctx, urls.ws_url(base, "/other"))
    expect(status == 404, f"/other: HTTP {status}, expected 404")
    return "101 without subprotocol or compression; attach and /other are 404; " + await _fork_of_nothing(ctx)


def _expect_404(suffix: str, status: int, body: bytes, codes: tuple[str, ...]) -> None:
    expect(status == 404, f"{suffix}: HTTP {status}, expected 404")
    expect(_error_code(body) in codes,
           f"{suffix}: 404 body should be an OpenAI-style error with code {' or '.join(codes)}, got {body[:200]!r}")


async def _fork_of_nothing(ctx: Context) -> str:
    """The fork socket of no session: a server that stores nothing to fork serves no such path
    (404 `unsupported_endpoint`); one that forks (a gateway with a store, check 44) upgrades it and
    tells the caller `session_not_found`, then closes 1008."""
    try:
        await refused_fork(ctx, "x", ctx.options.bearer, "a fork of no session")
    except websockets.InvalidStatus as exc:
        body = exc.response.body or b""
        _expect_404(FORK_PATH.format(session_id="x"), exc.response.status_code, body, ("unsupported_endpoint",))
        return "fork is 404"
    return "a fork of no session is session_not_found (this server forks)"


async def auth(ctx: Context) -> str:
    if ctx.options.auth_token is None:
        for bearer in (secrets.token_hex(8), secrets.token_hex(8), None):
            async with await ctx.wire(bearer=bearer) as w:
                await w.assert_open()
        return "auth off: random keys and no key all connect (pass --auth-token to test 401s)"
    for bearer, what in ((None, "no bearer"), (ctx.options.auth_token + "x", "a wrong bearer")):
        status, body = await _refused_status(ctx, ctx.url, bearer)
        expect(status == 401, f"{what}: HTTP {status}, expected 401")
        expect(_error_code(body) is not None or b'"error"' in body,
               f"{what}: 401 body should be JSON {{\"error\": {{...}}}}, got {body[:200]!r}")
    return "missing and wrong bearer get 401; the right one connects"


async def silent_client(ctx: Context) -> str:
    guard = ctx.options.idle_guard_s
    loop = asyncio.get_running_loop()
    async with await ctx.wire() as w:
        if guard is None:
            await w.assert_quiet(QUIET_S)
            expect(not w.has_ended, "socket closed during the quiet period")
            return f"nothing in {QUIET_S:g} s (pass --idle-guard-s to test the guard)"
        code = await w.ended(guard + 1.5)
        waited = loop.time() - w.dialled  # from the dial: the guard starts at the accept, no sooner
        expect(not w.log, f"a silent client received {len(w.log)} events")
        expect(code == 1000, f"idle guard closed with {code}, expected 1000")
        expect(waited >= min(QUIET_S, guard) - 0.1, f"closed after {waited:.2f} s, before the guard's {guard:g} s")
        return f"nothing received; closed 1000 after {waited:.2f} s"


CHECKS = (
    Check(1, "upgrade", upgrade),
    Check(2, "auth", auth),
    Check(3, "silent-client", silent_client, seconds=4.0),
)
