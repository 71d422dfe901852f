"""`liveplex bench move`: calls through a gateway while pods drain under them (docs/continuity.md).

`--sessions` callers hold calls through the gateway at `--base-url`, their frames stamped
(`roundtrip`), so a sim's echo shows each frame played back. `--drain-at-s` seconds into the calls
the bench drains every pod named by `--drain` (its admin `/drain`), which asks the gateway to move
its calls to the other pods. The report says how long each drain took (until its pod was empty),
and for the calls: the gaps in the agent's audio at the caller (between two deltas' arrivals: the
steady ones before the drain, pooled, and each call's longest from the drain on, which holds its
move), the lateness of every frame against its playout schedule, and the echo's frame stamps
skipped (a frame never heard) or repeated (heard twice, or out of order).

A move is clean when every call ends `ok`, no stamp is skipped or repeated, and every call's
longest gap from the drain on is within one frame (80 ms) of the steady gaps' p99 (issue 24's
target). Lateness does not judge it: the playout schedule does not re-anchor, so one move shifts
every later frame and the p99 itself becomes the shift. Load stays on the machine the URLs name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

import numpy as np

from liveplex import listen, percentiles
from liveplex.bench import audio, caller
from liveplex.bench import pool as pool_mod
from liveplex.bench import target as target_mod
from liveplex.gptlive import urls
from liveplex.live import frames

GAP_SLACK_MS = frames.FRAME_MS
"""How far a call's longest gap from the drain on may exceed the steady gaps' p99 for a move to
count as clean: one frame."""
SETTLE_DELTAS = 12
"""A call's first deltas (about a second) are not steady: the player's start-up buffer fills."""


@dataclass(frozen=True, slots=True)
class MoveSettings:
    base_url: str
    model: str | None
    sessions: int
    seconds: float
    drain: tuple[str, ...]
    """Admin roots of the pods to drain (`http://host:port`)."""
    drain_at_s: float
    drain_deadline_s: float
    stagger_ms: int
    workers: int
    out: str | None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liveplex bench move", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--base-url", default=listen.DEFAULT_BASE_URL, help="the gateway (default: %(default)s)")
    p.add_argument("--model", help="model to start (default: the first of GET /v1/models)")
    p.add_argument("--sessions", type=int, default=8, help="calls (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=8.0, help="length of each call, s (default: %(default)s)")
    p.add_argument("--drain", action="append", required=True, metavar="ADMIN_URL",
                   help="a pod's admin root to drain mid-call, e.g. http://127.0.0.1:9001 (repeatable)")
    p.add_argument("--drain-at-s", type=float, default=3.0,
                   help="when to drain, s into the calls (default: %(default)s)")
    p.add_argument("--drain-deadline-s", type=float, default=30.0,
                   help="each drain's deadline: calls still there then end (default: %(default)s)")
    p.add_argument("--stagger-ms", type=int, default=20, help="between call starts, ms (default: %(default)s)")
    p.add_argument("--workers", type=int, default=1, help="client processes (default: %(default)s)")
    p.add_argument("--out", help="JSON report path (default: none)")
    return p


def parse(argv: list[str]) -> MoveSettings:
    p = build_parser()
    a = p.parse_args(argv)
    for flag, value in (("--sessions", a.sessions), ("--seconds", a.seconds), ("--workers", a.workers),
                        ("--drain-deadline-s", a.drain_deadline_s)):
        if value <= 0:
            p.error(f"{flag} must be > 0, got {value}")
    if not 0 <= a.drain_at_s < a.seconds:
        p.error(f"--drain-at-s must be within the call (0 to --seconds {a.seconds}), got {a.drain_at_s}")
    for url in a.drain:
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            p.error(f"--drain needs an http(s) admin root, got {url!r}")
    return MoveSettings(a.base_url, a.model, a.sessions, a.seconds, tuple(a.drain), a.drain_at_s,
                        a.drain_deadline_s, a.stagger_ms, a.workers, a.out)


def _drain(admin: str, deadline_s: float) -> dict[str, object]:
    """POST the pod's `/drain`, which answers once the pod is empty or at the deadline; timed."""
    began = time.monotonic()
    request = urllib.request.Request(f"{admin.rstrip('/')}/drain?deadline_s={deadline_s:g}", method="POST")
    with urllib.request.urlopen(request, timeout=deadline_s + 30) as response:
        answer = json.loads(response.read())
    return {"pod": admin, "seconds": round(time.monotonic() - began, 3), **answer}


def gaps(results: list[caller.CallResult], drain_ns: int) -> tuple[percentiles.Summary, percentiles.Summary]:
    """The steady gaps (µs between deltas before the drain, each call's first `SETTLE_DELTAS`
    left out), pooled; and each call's longest gap from the drain on, one per call."""
    steady: list[np.ndarray] = []
    longest: list[int] = []
    for r in results:
        arrivals = np.asarray(r.arrivals_ns, dtype=np.int64)
        if len(arrivals) < 2:
            continue
        between = np.diff(arrivals) // 1000
        after = arrivals[1:] >= drain_ns
        steady.append(between[~after][SETTLE_DELTAS:])
        if after.any():
            longest.append(int(between[after].max()))
    return (percentiles.summarize(np.concatenate(steady) if steady else []),
            percentiles.summarize(longest))


def report(settings: MoveSettings, results: list[caller.CallResult],
           drains: list[dict[str, object]], drain_ns: int) -> dict[str, object]:
    """The JSON report and its verdict (pure: tested on made-up results); `drain_ns`: when the
    drains were asked, on the callers' `perf_counter_ns` clock."""
    lateness = np.concatenate([np.asarray(r.lateness_us, dtype=np.int64) for r in results]) if results else []
    late = percentiles.summarize(lateness)
    steady, moved = gaps(results, drain_ns)
    over = round(moved.max - steady.p99, 3)
    skipped = sum(r.echo_skipped for r in results)
    repeated = sum(r.echo_repeated for r in results)
    failed = [r.error for r in results if not r.ok]
    clean = (not failed and skipped == 0 and repeated == 0 and moved.count > 0 and over <= GAP_SLACK_MS
             and all(d.get("ended_at_deadline") == 0 for d in drains))
    return {
        "sessions": settings.sessions, "seconds": settings.seconds, "drain_at_s": settings.drain_at_s,
        "ok": len(results) - len(failed), "failed": len(failed), "errors": sorted(set(map(str, failed))),
        "drains": drains, "steady_gap_ms": steady.as_dict(), "longest_gap_after_drain_ms": moved.as_dict(),
        "worst_gap_over_steady_p99_ms": over, "lateness_ms": late.as_dict(),
        "stamps_skipped": skipped, "stamps_repeated": repeated, "clean": clean,
    }


async def run(settings: MoveSettings) -> dict[str, object]:
    gateway = target_mod.Target("gateway", settings.base_url, None)
    model = settings.model or (await gateway.models() or ["gpt-live-1"])[0]
    calls = caller.CallSettings(
        url=urls.ws_url(settings.base_url), model=model, voice=None, instructions=None,
        audio_format="audio/pcm", rate=frames.SAMPLE_RATE, seconds=settings.seconds, chunk_ms=20,
        playout_ms=120, echo_rtt=True)
    with pool_mod.Pool(settings.workers) as pool:
        running = asyncio.create_task(pool.run(calls, audio.Source(None, True, 0), settings.sessions,
                                               settings.stagger_ms * 1_000_000))
        await asyncio.sleep(pool_mod.LEAD_NS / 1e9 + settings.drain_at_s)
        drain_ns = time.perf_counter_ns()
        drains = await asyncio.gather(*(asyncio.to_thread(_drain, url, settings.drain_deadline_s)
                                        for url in settings.drain))
        results = await running
    return report(settings, results, list(drains), drain_ns)


def main(argv: list[str]) -> int:
    settings = parse(argv)
    result = asyncio.run(run(settings))
    text = json.dumps(result, indent=2)
    print(text)
    if settings.out:
        with open(settings.out, "w") as f:
            f.write(text + "\n")
    return 0 if result["clean"] else 2
