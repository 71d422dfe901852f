"""`LocalRedis`: ready when it answers, restarts empty on the same port, says why it cannot start."""

from __future__ import annotations

import pytest
import redis

from liveplex.placement import LocalRedis, LocalRedisError


def test_a_restart_keeps_the_port_and_comes_back_empty() -> None:
    with LocalRedis() as server:
        url = server.url
        with redis.Redis.from_url(url, socket_timeout=2) as client:
            client.set("k", "v")
        server.restart()
        assert server.url == url and server.running
        with redis.Redis.from_url(url, socket_timeout=2) as client:
            assert client.get("k") is None
            assert client.config_get("save") == {"save": ""}
    assert not server.running


def test_a_missing_executable_is_a_clear_error() -> None:
    with pytest.raises(LocalRedisError, match="not found"):
        LocalRedis(executable="no-such-redis-server").start()


def test_a_taken_fixed_port_fails_with_the_servers_log() -> None:
    with LocalRedis() as first:
        with pytest.raises(LocalRedisError, match="exited"):
            LocalRedis(port=first.port).start()
