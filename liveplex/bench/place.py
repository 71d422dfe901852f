"""`liveplex bench place`: placements per second through one gateway, and the Redis decision's p99.

A placement here is what a caller waits for: the WebSocket handshake with the gateway, the
`session.start`, the gateway's `place.lua`, its upstream connect and the pod's `session.started`
relayed back. `--concurrency` callers repeat that for `--seconds`, each hanging up at once after
its start (the pod frees the slot at its next tick, so size pods with spare slots). With
`--gateway-pid` it also reads the gateway's CPU time, so the report says what one gateway core
places per second whatever else shares the machine (the callers' own handshakes cost about as
much CPU as the gateway's, and on a small machine they share its cores). With
`--redis-url` it also times the bare `place.lua` round trip on a synthetic pool
(`liveplex.placement.latency`) side by side. Loopback only; it stops by itself.

With `--simulate` there is no gateway: `--pods` simulated pods heartbeat at their real rate into one
Redis (`--redis-url`, else a throwaway redis-server) while placements run at `--rate`
(`liveplex.bench.place_sim`): Redis CPU per placement and per decision, the placements/s one Redis
sustains, placement and heartbeat round trips, and an audit that no pod went over its cap.

With `--quality` a pool held at `--occupancy` is placed on through `--subpools` counts of sub-pools
(`liveplex.bench.place_quality`), on one Redis or a local cluster of `--shards` shards: how often a
decision picked a pod worse than the pool's best, and how far apart pods and sub-pools end up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable

import orjson
import websockets

from liveplex import listen, percentiles
from liveplex.bench import loop, target
from liveplex.gptlive import urls

START = '{"type":"session.start","event_id":"b","session":{"model":"%s"}}'


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liveplex bench place", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--base-url", help=f"the gateway, e.g. {listen.DEFAULT_BASE_URL} (required without --simulate; "
                                      "default: none)")
    p.add_argument("--simulate", action="store_true",
                   help="no gateway: simulated pods and placements on one Redis (place_sim; default: off)")
    p.add_argument("--model", default="gpt-live-1", help="session.model (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=32, help="callers at once (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=10.0, help="how long to place (default: %(default)s)")
    p.add_argument("--gateway-pid", type=int, default=None,
                   help="the gateway's pid: also report its CPU per placement (default: no)")
    p.add_argument("--redis-url", default=None, help="also time place.lua alone on this Redis (default: no)")
    p.add_argument("--pods", type=int, default=8,
                   help="pods of the synthetic pool for --redis-url or --simulate (default: %(default)s)")
    p.add_argument("--rate", type=float, default=500.0,
                   help="--simulate: placements per second, all callers together (default: %(default)s)")
    p.add_argument("--capacity", type=int, default=32, help="--simulate: slots per pod (default: %(default)s)")
    p.add_argument("--hold", type=float, default=1.0,
                   help="--simulate: seconds a placed session runs before it ends (default: %(default)s)")
    p.add_argument("--decision-rounds", type=int, default=5000,
                   help="--simulate: most place.lua calls timed alone (3 s at most) (default: %(default)s)")
    p.add_argument("--quality", action="store_true",
                   help="grade sub-pool placement against the single-pool choice (place_quality; default: off)")
    p.add_argument("--subpools", type=int, nargs="+", default=None,
                   help="--quality: the sub-pool counts compared, 1 = one pool (default: 1 3 6); --simulate: "
                        "the pool's sub-pools, one count (default: 1)")
    p.add_argument("--shards", type=int, default=0,
                   help="--quality, --simulate: on a local Redis Cluster of this many shards, or with "
                        "--redis-url: that URL is a cluster node (default: 0, one Redis)")
    p.add_argument("--occupancy", type=float, default=0.7,
                   help="--quality: the share of slots held while placing (default: %(default)s)")
    p.add_argument("--steps", type=int, default=5000,
                   help="--quality: decisions graded per sub-pool count (default: %(default)s)")
    p.add_argument("--out", default=None, help="JSON report path (default: stdout only)")
    return p


async def _caller(url: str, start: str, until: float, samples: list[int], outcomes: Counter[str]) -> None:
    while time.perf_counter() < until:
        t0 = time.perf_counter_ns()
        try:
            async with websockets.connect(url, compression=None, open_timeout=5, close_timeout=1) as ws:
                await ws.send(start)
                async with asyncio.timeout(5):
                    kind = orjson.loads(await ws.recv())
            if kind.get("type") == "session.started":
                samples.append((time.perf_counter_ns() - t0) // 1000)
                outcomes["placed"] += 1
            else:
                outcomes[str(kind.get("error", {}).get("code", kind.get("type")))] += 1
        except (OSError, TimeoutError, websockets.WebSocketException):
            outcomes["failed"] += 1


async def measure(base_url: str, model: str, concurrency: int, seconds: float,
                  gateway_pid: int | None = None) -> dict[str, object]:
    url = urls.ws_url(base_url)
    gateway = target.Target("gateway", base_url, gateway_pid)
    cpu0 = gateway.cpu_s()
    samples: list[int] = []
    tally: Counter[str] = Counter(placed=0, failed=0)
    until = time.perf_counter() + seconds
    t0 = time.perf_counter()
    await asyncio.gather(*(_caller(url, START % model, until, samples, tally) for _ in range(concurrency)))
    took = time.perf_counter() - t0
    cpu1 = gateway.cpu_s()
    report: dict[str, object] = {
        "placements_per_s": round(tally["placed"] / took, 1), "seconds": round(took, 2),
        "concurrency": concurrency, "outcomes": dict(tally), "start_ms": percentiles.summarize(samples).as_dict()}
    if cpu0 is not None and cpu1 is not None and tally["placed"]:
        per_ms = (cpu1 - cpu0) * 1e3 / tally["placed"]
        report["gateway_cpu"] = {"seconds": round(cpu1 - cpu0, 3), "ms_per_placement": round(per_ms, 3),
                                 "placements_per_core_s": round(1e3 / per_ms, 1)}
    return report


def _on_redis(args: argparse.Namespace, measure: Callable[[str, bool], dict[str, object]]) -> dict[str, object]:
    """`measure(url, cluster)` on `--redis-url`, else on a throwaway redis-server or local cluster."""
    from liveplex.placement import LocalRedis
    from liveplex.placement.local_redis import LocalCluster

    if args.shards < 0:
        raise ValueError("--shards must be >= 0")
    if args.redis_url:
        return measure(args.redis_url, args.shards > 0)
    with LocalCluster(args.shards) if args.shards else LocalRedis() as server:
        return measure(server.url, args.shards > 0)


def _simulate(args: argparse.Namespace) -> dict[str, object]:
    from liveplex.bench import place_sim

    if args.subpools is not None and len(args.subpools) != 1:
        raise ValueError("--subpools takes one count with --simulate")
    count = args.subpools[0] if args.subpools else 1
    return _on_redis(args, lambda url, cluster: place_sim.measure(place_sim.Plan(
        url, args.pods, args.capacity, args.rate, args.seconds, args.hold, args.concurrency, args.decision_rounds,
        subpools=count, cluster=cluster)))


def _quality(args: argparse.Namespace) -> dict[str, object]:
    from liveplex.bench import place_quality

    counts = tuple(args.subpools or (1, 3, 6))
    return _on_redis(args, lambda url, cluster: place_quality.measure(place_quality.Plan(
        url, cluster, args.pods, args.capacity, counts, args.steps, args.occupancy)))


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.seconds <= 0:
        print("liveplex bench place: --concurrency must be >= 1 and --seconds > 0", file=sys.stderr)
        return 2
    if args.simulate or args.quality:
        try:
            report = _quality(args) if args.quality else _simulate(args)
        except ValueError as exc:
            print(f"liveplex bench place: {exc}", file=sys.stderr)
            return 2
        _write(report, args.out)
        return 0
    if not args.base_url:
        print("liveplex bench place: --base-url is required (or --simulate)", file=sys.stderr)
        return 2
    report = loop.run(measure(args.base_url, args.model, args.concurrency, args.seconds, args.gateway_pid))
    if args.redis_url:
        from liveplex.placement import latency

        decision, redis_us = loop.run(latency.measure(args.redis_url, args.pods, 5000))
        report["decision_ms"] = {**decision.as_dict(), "pods": args.pods, "redis_us_per_call": round(redis_us, 1)}
    _write(report, args.out)
    return 0


def _write(report: dict[str, object], path: str | None) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    if path:
        with open(path, "w") as out:
            out.write(text + "\n")
