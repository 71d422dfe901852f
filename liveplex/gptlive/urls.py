"""The SDK's URL rules, written once: where a base URL's live socket and root endpoints are."""

from __future__ import annotations

import urllib.parse

LIVE_SUFFIX = "/live/sessions"
"""The live socket under an SDK base URL (`.../v1`)."""
LIVE_PATH = "/v1" + LIVE_SUFFIX
"""The live socket's path on a liveplex server: what pods and gateways serve and gateways dial."""
REATTACH_QUERY = "session_id"
"""The query parameter that continues a running session through any gateway: on the live socket
(the SDK's `on_reconnecting=lambda ev: {"extra_query": {"session_id": sid}}`) and on a WebRTC
re-offer's `POST` (`client.live.create(..., extra_query={"session_id": sid})`)."""
LAST_EVENT_QUERY = "last_event_id"
"""...and the last server event the caller saw: it gets those after it it missed."""
FORK_PATH = LIVE_PATH + "/{session_id}/fork"
"""A stored session's fork: the fork socket (`client.live.forks.connect(session_id=...)`) and a
WebRTC fork's `POST` (`client.live.sessions.fork`), docs/storage.md "Forks"."""
_FORK_HEAD, _FORK_TAIL = FORK_PATH.split("{session_id}")


def fork_source(path: str) -> str | None:
    """The stored session a fork's path (query stripped) names; None for any other path."""
    if not (path.startswith(_FORK_HEAD) and path.endswith(_FORK_TAIL)):
        return None
    session_id = path[len(_FORK_HEAD):-len(_FORK_TAIL)]
    return session_id if session_id and "/" not in session_id else None


def ws_url(base_url: str, suffix: str = LIVE_SUFFIX) -> str:
    """gpt-live §12.1: http→ws, else wss; trailing slashes stripped; `suffix` appended.

    `http://h:8000/v1` -> `ws://h:8000/v1/live/sessions`.
    """
    parts = urllib.parse.urlsplit(base_url)
    scheme = "ws" if parts.scheme in ("http", "ws") else "wss"
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + suffix, "", ""))


def root_url(base_url: str, path: str) -> str:
    """An HTTP URL at the server root, e.g. `/live/config` (not under `/v1`)."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
