"""Running the bench's coroutines on uvloop where it is installed (performance.md §3.4)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TypeVar

T = TypeVar("T")


def run(main: Coroutine[object, object, T]) -> T:
    """`asyncio.run(main)` on a uvloop loop if uvloop is importable, else on asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
