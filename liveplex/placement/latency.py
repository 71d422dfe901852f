"""How long one `place()` takes on loopback: a client round trip of `place.lua` on a synthetic pool.

A first reading for performance §5 ("Redis placement decision p99 <= 1 ms") until `liveplex bench
place` exists. Each pool has P pods with room for every round, so every call walks all P pods and
reserves one slot; leases pile up (ZCARD is O(1), so that costs nothing). Reports the
client round trip (redis-py asyncio, one connection, sequential) and Redis's own time per script
call (`INFO commandstats`).

    python -m liveplex.placement.latency [--redis-url URL] [--pods 8 64] [--rounds 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import redis.asyncio

from liveplex import percentiles
from liveplex.placement import choice, client, local_redis, record


async def measure(url: str, pods: int, rounds: int) -> tuple[percentiles.Summary, float]:
    """(client round trip summary in ms, Redis-side µs per script call) for a pool of `pods` pods."""
    pool = f"bench/pods-{pods}"
    async with client.PlacementClient(url, timeout_ms=2000) as placement:
        for i in range(pods):
            await placement.heartbeat(pool, f"pod-{i}", record.PodRecord(f"10.0.{i // 256}.{i % 256}:8000", rounds, 0),
                                      ttl_ms=600_000)
        stats = redis.asyncio.Redis.from_url(url, decode_responses=True)
        await stats.config_resetstat()
        samples_us: list[int] = []
        for n in range(rounds):
            started = time.perf_counter_ns()
            placed = await placement.place(pool, f"s{n}", stale_ms=600_000)
            samples_us.append((time.perf_counter_ns() - started) // 1000)
            assert isinstance(placed, choice.Placed)
        evalsha = (await stats.info("commandstats")).get("cmdstat_evalsha", {})
        await stats.aclose()
    warm = samples_us[rounds // 10:]  # the first 10 % warm up connections and caches
    return percentiles.summarize(warm), float(evalsha.get("usec_per_call", 0.0))


async def _main(url: str, pod_counts: list[int], rounds: int) -> None:
    print(f"{'pods':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'redis us/call':>14}")
    for pods in pod_counts:
        summary, server_us = await measure(url, pods, rounds)
        print(f"{pods:>5} {summary.p50:>8.3f} {summary.p99:>8.3f} {summary.max:>8.3f} {server_us:>14.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liveplex.placement.latency",
                                     description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--redis-url", help="an existing Redis; default: a throwaway redis-server")
    parser.add_argument("--pods", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--rounds", type=int, default=5000)
    args = parser.parse_args(argv)
    if args.redis_url:
        asyncio.run(_main(args.redis_url, args.pods, args.rounds))
        return 0
    with local_redis.LocalRedis() as server:
        asyncio.run(_main(server.url, args.pods, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
