"""A real redis-server for tests (platform §11 item 6): one per test session, flushed per test.

`redis_server` is the session's `LocalRedis`; a test may `stop()` and `start()` (or `restart()`) it to
play "Redis went down", on the same port, and the next test's `redis_url` brings it back if it was
left stopped. A test that needs a server of its own uses `running_redis()`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import redis

from liveplex.placement import local_redis


@contextlib.contextmanager
def running_redis() -> Iterator[local_redis.LocalRedis]:
    """A fresh redis-server on a free loopback port, killed on exit."""
    server = local_redis.LocalRedis()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def flush(url: str) -> None:
    """Empty every database and the script cache, as a new server would be."""
    with redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) as client:
        client.flushall()
        client.script_flush()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[local_redis.LocalRedis]:
    with running_redis() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: local_redis.LocalRedis) -> str:
    """The shared server's URL, running and empty."""
    if not redis_server.running:
        redis_server.start()
    flush(redis_server.url)
    return redis_server.url
