"""What a running check may use: the target, and sockets opened the way the SDK opens them, each
within the run's session budget."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

import openai

from liveplex.conformance import sessions, target, wire
from liveplex.gptlive import urls


def sdk_headers(base_url: str, bearer: str | None) -> dict[str, str]:
    """The headers the SDK sends at the upgrade (gpt-live §2.2), minus Authorization when None."""
    client = openai.OpenAI(base_url=base_url, api_key=bearer or "unused")
    headers = {**client.default_headers, **client.auth_headers}
    if bearer is None:
        headers.pop("Authorization", None)
    return {k: str(v) for k, v in headers.items() if isinstance(v, str)}


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    """One check's view of the run."""

    target: target.Target
    ledger: wire.Ledger
    check: int
    sessions: sessions.Sessions | None = None
    """The run's budget; None for a check that holds every slot already (it runs alone)."""
    deadline: sessions.Deadline | None = None
    """The check's time limit, stopped while it waits for slots."""

    @property
    def options(self) -> target.Options:
        return self.target.options

    @property
    def server(self) -> target.Server:
        return self.target.server

    @property
    def url(self) -> str:
        return urls.ws_url(self.options.base_url)

    def headers(self, bearer: str | None = "") -> dict[str, str]:
        """SDK headers with the run's bearer ("" = default), another bearer, or none (None)."""
        return sdk_headers(self.options.base_url, self.options.bearer if bearer == "" else bearer)

    async def wire(self, *, bearer: str | None = "", path: str = "/live/sessions") -> wire.Wire:
        """Open a validated socket in a slot of the budget; use it as `async with await ctx.wire() as w`."""
        url = urls.ws_url(self.options.base_url, path)
        give_back = await self._slot()
        try:
            return await wire.Wire.open(url, self.headers(bearer), self.ledger, self.check,
                                        self.options.timeout_s, give_back)
        except BaseException:
            give_back()
            raise

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot while a session runs outside `wire` (an SDK client)."""
        give_back = await self._slot()
        try:
            yield
        finally:
            give_back()

    async def _slot(self) -> sessions.GiveBack:
        if self.sessions is None:
            return sessions.nothing
        return await self.sessions.take(1, self.deadline)
