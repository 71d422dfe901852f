"""Bearer-token checks for the live socket and `/v1/*`: constant time, one header, keys not on argv.

`load_keys` reads the accepted keys from a flag, the environment or a file (a token on the
command line is visible in the process table, so the flag is the least preferred). `match_key`
answers which key a request carries, comparing against every key in constant time, and refuses a
request with more than one credential rather than trusting the first, or with a malformed one
(any byte a bearer token cannot hold is a refusal, never an exception: an exception inside an
upgrade once left its connection counted forever).

A browser cannot set `Authorization` on a WebSocket, so the live socket also takes the key as a
subprotocol, OpenAI's convention: `new WebSocket(url, ["liveplex", "openai-insecure-api-key.KEY"])`.
The server then selects `liveplex` (a browser fails a handshake that selects none of the offered
subprotocols), so the key is never echoed.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from websockets.datastructures import Headers
from websockets.exceptions import InvalidHeader
from websockets.headers import parse_subprotocol

ENV_KEYS = "LIVEPLEX_API_KEYS"
"""Comma-separated accepted keys, when neither flag names any."""

ANONYMOUS = ""
"""What `match_key` answers when the server needs no key."""

KEY_SUBPROTOCOL = "openai-insecure-api-key."
"""Prefix of the subprotocol a browser offers its key as."""

PAGE_SUBPROTOCOL = "liveplex"
"""The subprotocol selected when a client offers it (next to a key subprotocol)."""


def load_keys(flag: str | None, key_file: Path | None, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The accepted keys: the flag's, then the file's (one per line, `#` comments), then the
    environment's; raises ValueError naming the flag when the file cannot be read or is empty."""
    keys: list[str] = []
    if flag:
        keys += _checked("--api-key", [flag])
    if key_file is not None:
        try:
            lines = key_file.read_text().splitlines()
        except OSError as exc:
            raise ValueError(f"--api-key-file: cannot read {key_file}: {exc.strerror}") from exc
        found = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        if not found:
            raise ValueError(f"--api-key-file: {key_file} holds no key")
        keys += _checked("--api-key-file", found)
    if not keys:
        keys += _checked(f"${ENV_KEYS}", [k.strip() for k in environ.get(ENV_KEYS, "").split(",") if k.strip()])
    return tuple(dict.fromkeys(keys))


def _checked(source: str, keys: list[str]) -> list[str]:
    for i, key in enumerate(keys):
        if not well_formed(key):
            raise ValueError(f"{source}: key {i + 1} is not printable ASCII without spaces (a bearer token)")
    return keys


def well_formed(token: str) -> bool:
    """Whether `token` can be a bearer credential: printable ASCII, no white space. Anything else
    (bytes a header parser kept as surrogates, a Latin-1 letter) is refused before any comparison."""
    return token.isascii() and token.isprintable() and " " not in token and bool(token)


def environment() -> Mapping[str, str]:
    """The process environment, read at startup only (style rule 6)."""
    return os.environ


def subprotocols(headers: Iterable[str]) -> list[str] | None:
    """The subprotocols offered in `Sec-WebSocket-Protocol` header values; None when malformed."""
    try:
        return [str(p) for value in headers for p in parse_subprotocol(value)]
    except InvalidHeader:
        return None


def match_key(keys: tuple[str, ...], authorization: Iterable[str], offered: Iterable[str] = ()) -> str | None:
    """The key the request carries, in `Authorization: Bearer <key>` or a `KEY_SUBPROTOCOL`
    subprotocol; `ANONYMOUS` when `keys` is empty; None to refuse (no credential, two of them, or
    an unknown key)."""
    if not keys:
        return ANONYMOUS
    values = list(authorization)
    values += [f"Bearer {p.removeprefix(KEY_SUBPROTOCOL)}" for p in offered if p.startswith(KEY_SUBPROTOCOL)]
    if len(values) != 1:
        return None
    scheme, _, given = values[0].partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not well_formed(given):
        return None
    found = None
    candidate = given.encode()
    for key in keys:  # every key compared: the time taken says nothing about which matched
        if hmac.compare_digest(candidate, key.encode()):
            found = key
    return found


def upgrade_key(keys: tuple[str, ...], headers: Headers) -> str | None:
    """`match_key` for a WebSocket upgrade: its `Authorization` headers and offered subprotocols."""
    offered = subprotocols(headers.get_all("sec-websocket-protocol"))
    return None if offered is None else match_key(keys, headers.get_all("authorization"), offered)
