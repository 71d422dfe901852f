"""Waiting for a session's outputs in tests, with a timeout instead of sleeps."""

from __future__ import annotations

import asyncio

from liveplex.live import Audio, Opened


async def until(opened: Opened, kind: type, timeout: float = 5.0) -> list:
    """Collect outputs until one of type `kind` arrives."""
    got: list = []
    while not any(isinstance(o, kind) for o in got):
        got += await _next(opened, timeout)
    return got


async def audio_frames(opened: Opened, n: int, timeout: float = 5.0) -> list:
    """Collect outputs until `n` audio frames arrived."""
    got: list = []
    while sum(isinstance(o, Audio) for o in got) < n:
        got += await _next(opened, timeout)
    return got


async def _next(opened: Opened, timeout: float) -> list:
    batch = await asyncio.wait_for(opened.output.next(), timeout)
    assert batch, "output ended without Closed"
    return batch
