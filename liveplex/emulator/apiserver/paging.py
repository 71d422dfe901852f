"""`limit` and `continue`: lists in chunks, with kube-apiserver's continue tokens.

Development emulator, not for production. Pure. A token carries the list's resourceVersion and the
key after which the next chunk starts (upstream's format: base64 of `{"v","rv","start"}`). The
real server serves every chunk from the first chunk's snapshot; the emulator keeps no snapshots,
so a token is honoured only while no object of the type has changed since (the caller checks),
and otherwise answers 410 Expired as upstream does for a token whose snapshot was compacted.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from liveplex.emulator.apiserver import errors

_VERSION = "meta.k8s.io/v1"
EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new list "
           "without the continue parameter.")


@dataclass(frozen=True, slots=True)
class Token:
    rv: int
    start: str
    """The first key (`namespace/name`) the next chunk may hold."""


def key(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def encode(token: Token) -> str:
    text = json.dumps({"v": _VERSION, "rv": token.rv, "start": token.start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode(text: str) -> Token:
    try:
        body = json.loads(base64.urlsafe_b64decode(text.encode()))
        if body.get("v") != _VERSION:
            raise ValueError("unsupported version")
        return Token(int(body["rv"]), str(body["start"]))
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None


def expired() -> errors.ApiError:
    return errors.ApiError(410, "Expired", EXPIRED)


def page(items: list[dict], rv: int, size: int | None, after: Token | None) -> tuple[list[dict], str, int | None]:
    """The chunk of sorted `items`, its continue token ("" at the end) and how many remain after it."""
    if after is not None:
        items = [i for i in items if key(i) >= after.start]
    if size is None or len(items) <= size:
        return items, "", None
    chunk = items[:size]
    return chunk, encode(Token(rv, key(chunk[-1]) + "\x00")), len(items) - size
