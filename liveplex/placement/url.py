"""Where the placement Redis is and how to trust it: `--redis-url`, else `$LIVEPLEX_REDIS_URL`,
plus `$LIVEPLEX_REDIS_CA` for `rediss://`, checked once.

The URL may carry a password or an ACL user's (`redis://USER:PASSWORD@host`), and a flag is visible
to anyone who can list processes (`ps`, `/proc/PID/cmdline`, a Kubernetes pod's spec), so every
command reads it from the environment too, and the chart and the operator put it only there (from
a Secret). A Redis serving TLS (`rediss://`) with a certificate from a private CA is trusted through
`$LIVEPLEX_REDIS_CA`, the CA bundle's PEM text (what a Secret key holds) or a file's path; it
becomes the URL's `ssl_ca_data` or `ssl_ca_certs` parameter, which the Redis client reads, so the
URL stays the one value every client is built from. The scheme also says whether it is one Redis or
a Redis Cluster (`redis+cluster://`, `rediss+cluster://`: any node of it), so a deployment turns the
cluster on where it sets the URL (the Secret), and every engine pod, gateway and the operator follow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlencode

REDIS_URL_ENV = "LIVEPLEX_REDIS_URL"
REDIS_CA_ENV = "LIVEPLEX_REDIS_CA"
CLUSTER_SCHEMES = {"redis+cluster://": "redis://", "rediss+cluster://": "rediss://"}
"""A Redis Cluster's scheme -> the scheme its client is given (`cluster`)."""
SCHEMES = ("redis://", "rediss://", "unix://", *CLUSTER_SCHEMES)
_TLS = ("rediss://", "rediss+cluster://")
_PEM = "-----BEGIN"


def redis_url(flag: str | None, environ: Mapping[str, str]) -> str | None:
    """The URL from the flag, else the environment, else None, with `$LIVEPLEX_REDIS_CA` in it;
    raises ValueError naming where a bad value came from."""
    url, source = (flag, "--redis-url") if flag else (environ.get(REDIS_URL_ENV) or None, f"${REDIS_URL_ENV}")
    if url is not None and not url.startswith(SCHEMES):
        shown = url.split("@", 1)[-1]  # never echo a password
        raise ValueError(f"{source}: expected redis://HOST:PORT (or rediss://, unix://, redis+cluster://, "
                         f"rediss+cluster://), got ...{shown!r}")
    ca = environ.get(REDIS_CA_ENV) or None
    if url is None or ca is None:
        return url
    if not url.startswith(_TLS):
        raise ValueError(f"${REDIS_CA_ENV} is set but {source} is not a rediss:// URL: a CA trusts only TLS")
    if ca.lstrip().startswith(_PEM):
        parameter = {"ssl_ca_data": ca}
    elif os.path.isfile(ca):
        parameter = {"ssl_ca_certs": ca}
    else:
        raise ValueError(f"${REDIS_CA_ENV}: neither PEM text nor a file: {ca[:80]!r}")
    return f"{url}{'&' if '?' in url else '?'}{urlencode(parameter)}"


def cluster(url: str) -> tuple[str, bool]:
    """The URL the Redis client is built from and whether it names a Redis Cluster (its scheme)."""
    for scheme, plain in CLUSTER_SCHEMES.items():
        if url.startswith(scheme):
            return plain + url[len(scheme):], True
    return url, False
