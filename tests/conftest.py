"""Fixtures every test directory may use."""

from tests.support.redis import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]
