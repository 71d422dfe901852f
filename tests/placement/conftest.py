"""Placement fixtures: a `PlacementClient` and a raw Redis client on the shared test server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from liveplex.placement import PlacementClient


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[PlacementClient]:
    async with PlacementClient(redis_url, timeout_ms=2000) as placement:
        yield placement


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """For arranging states no liveplex writer produces (old heartbeats, expired leases) and for audits."""
    connection = redis.asyncio.Redis.from_url(redis_url, decode_responses=True, socket_timeout=2)
    yield connection
    await connection.aclose()
