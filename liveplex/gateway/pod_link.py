"""`PodLink`: how this gateway talks to its pods: the live socket's dial and the pods' handover routes.

One per gateway, shared by every session's leg. It owns what each talk with a pod carries: the pod
token (`--pod-key-file`), TLS (`--upstream-ca`, `--upstream-server-name`), the connect and start
budgets, and the HTTP client for the handover routes. It decides nothing about placement: a pod it
could not reach is the caller's to report (`leg.Placer.unreachable`), so the breakers and the
reservations stay with placement.

- `open` dials a placed pod with the session's headers (`hop.SESSION_ID_HEADER`, `hop.POOL_HEADER`,
  and `hop.IMPORT_HEADER` to continue an import), forwards the client's `session.start` and reads
  the pod's first answer (`Opened`); what the pod sends right behind it waits in `Opened.backlog`
  until the leg relays from the socket.
- `export` and `offer` are a move's HTTP steps (`hop.EXPORT_PATH`, `hop.IMPORT_PATH`,
  `hop.RESUME_PATH`), on the port and with the TLS of the pod's live socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from liveplex.gateway import upstream
from liveplex.gateway.settings import GatewaySettings
from liveplex.gptlive.server import hop
from liveplex.gptlive.server.tls import Tls
from liveplex.placement import Placed

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Opened:
    """A pod's socket that answered a forwarded `session.start`: `answer`, its first message; the
    messages after it gather in `backlog` until the socket's `on_message` is taken over."""

    up: upstream.Upstream
    answer: str
    backlog: list[str | bytes] = field(default_factory=list)


class PodLink:
    """See the module docstring. `connect_timeout_s`: the dial and upgrade; `start_timeout_s`: the
    pod's answer to a start, and each handover request."""

    def __init__(self, connect_timeout_s: float, start_timeout_s: float, pod_key: str | None = None,
                 tls: Tls | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.start_timeout_s = start_timeout_s
        self.headers: Mapping[str, str] = {} if pod_key is None else {"Authorization": f"Bearer {pod_key}"}
        """What every request to a pod carries besides its own headers: the pod token."""
        self.tls = tls
        """Pods are dialed over TLS; None: plain."""
        self._http = httpx.AsyncClient(headers=self.headers, timeout=start_timeout_s,
                                       verify=False if tls is None else tls.context)
        """Made here, not on the first move: a client with httpx's default verification loads the
        CA bundle (about 50 ms on the loop, a gap in every relayed call's audio)."""
        self._scheme = "http" if tls is None else "https"
        self._tls_name = {} if tls is None or tls.server_name is None else {"sni_hostname": tls.server_name}
        """The name pod certificates carry (`--upstream-server-name`), checked instead of the address."""

    @classmethod
    def of(cls, settings: GatewaySettings, start_timeout_s: float) -> PodLink:
        tls = (None if settings.upstream_ca is None
               else Tls.trusting(settings.upstream_ca, settings.upstream_server_name))
        return cls(settings.connect_timeout_ms / 1000, start_timeout_s, settings.pod_key, tls)

    async def open(self, placed: Placed, session_id: str, pool: str, start: str | None,
                   import_id: str | None = None, reattach: str | None = None) -> Opened | None:
        """Dial `placed` for the session (continuing the import `import_id` when given), send it
        `start` and read its answer; None when it could not be dialled within the connect budget,
        or hung up or said nothing within the start budget (the socket is then aborted).
        `reattach` (the last event the caller saw, or ""): continue the running session instead,
        sending nothing (`hop.REATTACH_HEADER`); its answer is then `hop.REATTACHED`."""
        headers = {**self.headers, hop.SESSION_ID_HEADER: session_id, hop.POOL_HEADER: pool}
        if import_id is not None:
            headers[hop.IMPORT_HEADER] = import_id
        if reattach is not None:
            headers[hop.REATTACH_HEADER] = reattach
        try:
            up = await upstream.connect(placed.addr, headers, self.connect_timeout_s, self.tls)
        except (OSError, TimeoutError, ValueError, upstream.UpstreamError):
            return None
        inbox: list[str | bytes] = []
        arrived = asyncio.Event()

        def queued(message: str | bytes) -> None:
            inbox.append(message)
            arrived.set()

        up.on_message = queued
        if start is not None:
            up.send(start)
        waiting = asyncio.ensure_future(arrived.wait())
        try:
            await asyncio.wait({waiting, up.lost}, timeout=self.start_timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled: the leg let go of the session
            up.abort()
            raise
        finally:
            waiting.cancel()
        if not inbox:
            up.abort()
            return None
        first = inbox.pop(0)
        return Opened(up, first if isinstance(first, str) else first.decode(errors="replace"), inbox)

    async def export(self, placed: Placed, session_id: str, after: int) -> tuple[bytes, int] | None:
        """The session's blob from its pod (`hop.EXPORT_PATH`) once it read the first `after`
        messages of the session's socket, and how many it read (`hop.READ_HEADER`); or None: the
        pod refused or failed, and the session stays there."""
        try:
            answer = await self._post(placed, hop.EXPORT_PATH.format(session_id=session_id),
                                      params={hop.EXPORT_AFTER: after})
        except httpx.HTTPError as exc:
            logger.warning("export failed", extra={"pod": placed.pod, "error": str(exc)})
            return None
        if answer.status_code != 200:
            logger.warning("export refused", extra={"pod": placed.pod, "status": answer.status_code,
                                                    "body": answer.text[:200]})
            return None
        read = answer.headers.get(hop.READ_HEADER, "")
        return answer.content, int(read) if read.isdigit() else after

    async def offer(self, placed: Placed, blob: bytes, resume: bool) -> str | None:
        """Offer a blob (`hop.IMPORT_PATH`) or, `resume`, a resume record (`hop.RESUME_PATH`) to a
        pod: the id it holds it under, or None."""
        path = hop.RESUME_PATH if resume else hop.IMPORT_PATH
        try:
            answer = await self._post(placed, path, content=blob, headers={"content-type": "application/octet-stream"})
            import_id = answer.json().get("import_id") if answer.status_code == 201 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            logger.warning("import failed", extra={"pod": placed.pod, "error": str(exc)})
            return None
        if not isinstance(import_id, str):
            logger.warning("import refused", extra={"pod": placed.pod, "status": answer.status_code,
                                                    "body": answer.text[:200]})
            return None
        return import_id

    async def close(self) -> None:
        await self._http.aclose()

    async def _post(self, placed: Placed, path: str, **request: Any) -> httpx.Response:
        """POST to one of a pod's handover routes, on the port and with the TLS of its live socket."""
        return await self._http.post(f"{self._scheme}://{placed.addr}{path}", extensions=self._tls_name, **request)
