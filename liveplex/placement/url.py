"""Where the placement Redis is: `--redis-url`, else `$LIVEPLEX_REDIS_URL`, checked once.

The URL may carry a password (`redis://:PASSWORD@host`), and a flag is visible to anyone who can
list processes (`ps`, `/proc/PID/cmdline`, a Kubernetes pod's spec), so every command reads it from
the environment too, and the chart and the operator put it only there (from a Secret).
"""

from __future__ import annotations

from collections.abc import Mapping

REDIS_URL_ENV = "LIVEPLEX_REDIS_URL"
SCHEMES = ("redis://", "rediss://", "unix://")


def redis_url(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The URL from the flag, else the environment, else None; raises ValueError naming where it
    came from when it is not a Redis URL."""
    url, source = (flag, "--redis-url") if flag else (environ.get(REDIS_URL_ENV) or None, f"${REDIS_URL_ENV}")
    if url is not None and not url.startswith(SCHEMES):
        shown = url.split("@", 1)[-1]  # never echo a password
        raise ValueError(f"{source}: expected redis://HOST:PORT (or rediss://, unix://), got ...{shown!r}")
    return url
