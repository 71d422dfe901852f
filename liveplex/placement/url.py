"""Where the placement Redis is and how to trust it: `--redis-url`, else `$LIVEPLEX_REDIS_URL`,
plus `$LIVEPLEX_REDIS_CA` for `rediss://`, checked once.

The URL may carry a password or an ACL user's (`redis://USER:PASSWORD@host`), and a flag is visible
to anyone who can list processes (`ps`, `/proc/PID/cmdline`, a Kubernetes pod's spec), so every
command reads it from the environment too, and the chart and the operator put it only there (from
a Secret). A Redis serving TLS (`rediss://`) with a certificate from a private CA is trusted through
`$LIVEPLEX_REDIS_CA`, the CA bundle's PEM text (what a Secret key holds) or a file's path; it
becomes the URL's `ssl_ca_data` or `ssl_ca_certs` parameter, which the Redis client reads, so the
URL stays the one value every client is built from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlencode

REDIS_URL_ENV = "LIVEPLEX_REDIS_URL"
REDIS_CA_ENV = "LIVEPLEX_REDIS_CA"
SCHEMES = ("redis://", "rediss://", "unix://")
_PEM = "-----BEGIN"


def redis_url(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The URL from the flag, else the environment, else None, with `$LIVEPLEX_REDIS_CA` in it;
    raises ValueError naming where a bad value came from."""
    url, source = (flag, "--redis-url") if flag else (environ.get(REDIS_URL_ENV) or None, f"${REDIS_URL_ENV}")
    if url is not None and not url.startswith(SCHEMES):
        shown = url.split("@", 1)[-1]  # never echo a password
        raise ValueError(f"{source}: expected redis://HOST:PORT (or rediss://, unix://), got ...{shown!r}")
    ca = environ.get(REDIS_CA_ENV) or None
    if url is None or ca is None:
        return url
    if not url.startswith("rediss://"):
        raise ValueError(f"${REDIS_CA_ENV} is set but {source} is not a rediss:// URL: a CA trusts only TLS")
    if ca.lstrip().startswith(_PEM):
        parameter = {"ssl_ca_data": ca}
    elif os.path.isfile(ca):
        parameter = {"ssl_ca_certs": ca}
    else:
        raise ValueError(f"${REDIS_CA_ENV}: neither PEM text nor a file: {ca[:80]!r}")
    return f"{url}{'&' if '?' in url else '?'}{urlencode(parameter)}"
