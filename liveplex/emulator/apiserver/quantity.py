"""Kubernetes resource quantities (`500m`, `1Gi`, `1e3`) parsed as kube-apiserver's decoder does.

Development emulator, not for production. Pure. A string that is no quantity is refused while the
body is decoded (400, in the decoder's words), before any validation runs; validation then compares
the parsed values (non-negative, requests within limits, whole numbers for extended resources).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERROR = f"quantities must match the regular expression '{PATTERN}'"
"""The decoder's message for a malformed quantity."""

_SUFFIXES = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal("1e3"),
    "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_FULL = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][-+]?[0-9]+)|([a-zA-Z]*))$")


def parse(value: object) -> Decimal | None:
    """The quantity's value, or None when `value` is not one (a JSON number is one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    found = _FULL.match(value)
    if found is None:
        return None
    number, exponent, suffix = found.groups()
    try:
        if exponent:
            return Decimal(number + exponent)
        scale = _SUFFIXES.get(suffix or "")
        return None if scale is None else Decimal(number) * scale
    except InvalidOperation:
        return None
