"""The place() latency probe runs end to end (its numbers are reported, never asserted)."""

from __future__ import annotations

from liveplex.placement import latency


async def test_the_probe_times_every_round_after_warm_up_and_reads_redis_time_per_call(redis_url: str) -> None:
    summary, server_us = await latency.measure(redis_url, pods=3, rounds=20)
    assert summary.count == 18
    assert 0 < summary.p50 <= summary.p99 <= summary.max
    assert server_us > 0


def test_the_command_line_prints_one_row_per_pool_size(redis_url: str, capsys) -> None:
    assert latency.main(["--redis-url", redis_url, "--pods", "2", "5", "--rounds", "20"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == ["pods", "2", "5"]
