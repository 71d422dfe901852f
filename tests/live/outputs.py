"""Waiting for a session's outputs in tests, with a deadline instead of sleeps."""

from __future__ import annotations

import asyncio

from liveplex.live import Audio
from liveplex.live.channel import Opened


async def until(opened: Opened, kind: type, timeout: float = 5.0) -> list:
    """Collect outputs until one of type `kind` arrives, within `timeout` seconds in all.

    One deadline for the whole wait, not one per batch: a session whose audio keeps flowing (a
    start that should have been refused) fails here in seconds, not when it expires minutes later.
    """
    got: list = []
    async with asyncio.timeout(timeout):
        while not any(isinstance(o, kind) for o in got):
            got += await _next(opened)
    return got


async def audio_frames(opened: Opened, n: int, timeout: float = 5.0) -> list:
    """Collect outputs until `n` audio frames arrived, within `timeout` seconds in all."""
    got: list = []
    async with asyncio.timeout(timeout):
        while sum(isinstance(o, Audio) for o in got) < n:
            got += await _next(opened)
    return got


async def _next(opened: Opened) -> list:
    batch = await opened.output.next()
    assert batch, "output ended without Closed"
    return batch
