"""The server under test: how the user says it was started, and what it reports about itself."""

from __future__ import annotations

import dataclasses

SIM_MODEL = "liveplex-sim"
"""The sim engine's served model id (live-contract §12.4); checks marked (sim) need its echo."""


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """The checker's flags: where the server is and how it was started."""

    base_url: str
    """`http://HOST:PORT/v1`; the socket is `ws://HOST:PORT/v1/live/sessions` (the SDK's rule)."""
    api_key: str = "local-key"
    """Sent as `Authorization: Bearer`; any string works while auth is off."""
    timeout_s: float = 10.0
    """Slack added to each check's own duration, and the wait for any single reply."""
    concurrency: int = 8
    """Checks run at once (each holds one or a few sessions)."""
    expect_capacity: int | None = None
    """The server's `--max-sessions`; capacity checks run when known and at most 8."""
    idle_guard_s: float | None = None
    """The server's pre-start idle guard, when shortened for the test (gpt-live §2.3)."""
    expect_max_seconds: float | None = None
    """The server's `--max-seconds`; the expiry check runs when known and at most 10 s."""
    auth_token: str | None = None
    """The server's bearer token when auth is on; used as the API key, and enables check 2's 401s."""
    expect_fault: bool = False
    """The server injects an engine fault (sim `--fail-after-ticks`); enables check 37."""
    custom_voice: str | None = None
    """A voice id registered on the server; check 14 starts a session with `{"id": ...}`."""
    expect_store: bool = False
    """The server stores sessions (a gateway with `--store-dir`): check 43 fails on a refusal."""
    other_api_key: str | None = None
    """A second key the server accepts: check 43 downloads the first key's recording with it (a 404)."""

    @property
    def bearer(self) -> str:
        return self.auth_token if self.auth_token is not None else self.api_key


@dataclasses.dataclass(frozen=True, slots=True)
class Server:
    """What the server reports at `GET /live/config`, `/live/stats` and `/v1/models`."""

    config: dict[str, object]
    stats: dict[str, object]
    models: tuple[str, ...]

    @property
    def model(self) -> str:
        return str(self.config.get("model") or (self.models[0] if self.models else ""))

    @property
    def is_sim(self) -> bool:
        return self.model == SIM_MODEL

    @property
    def max_sessions(self) -> int | None:
        value = self.stats.get("max_sessions")
        return value if isinstance(value, int) else None

    @property
    def max_seconds(self) -> float | None:
        value = self.config.get("max_seconds")
        return float(value) if isinstance(value, (int, float)) else None

    def int_setting(self, key: str, default: int) -> int:
        """An integer from `/live/config`, or the spec default when the server does not publish it."""
        value = self.config.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    options: Options
    server: Server

    @property
    def capacity(self) -> int | None:
        return self.options.expect_capacity or self.server.max_sessions

    @property
    def max_seconds(self) -> float | None:
        return self.options.expect_max_seconds or self.server.max_seconds
