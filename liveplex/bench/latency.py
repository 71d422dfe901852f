"""`liveplex bench latency`: what the caller buffer adds to every round trip, old and new side by side.

It starts two sim pods, one with today's defaults (the adaptive buffer in four tick groups, frames
sent as computed) and one as liveplex was before issue 31 (a fixed prebuffer of 2, one tick group,
pacing lead 12 ms and spread 20 ms), and runs `bench duplex --echo-rtt` against both at once for each
caller network profile (`bench.jitter`): the echo round trip above the ideal (echo frames x 80 ms),
the caller frames that missed their tick, those dropped, and the time to first audio. One JSON
report and one picture (latency against jitter, old buffer vs new).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from liveplex.bench import duplex, jitter, loop
from liveplex.bench import level as level_mod
from liveplex.bench import plot as plot_mod
from liveplex.bench import target as target_mod

VARIANTS: dict[str, list[str]] = {
    "adaptive": [],
    "fixed": ["--prebuffer-frames", "2", "--tick-groups", "1", "--pace-lead-ms", "12", "--pace-spread-ms", "20"],
}
"""The pod's flags per variant: today's defaults, and the defaults before issue 31."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liveplex bench latency", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--sessions", type=int, default=50, help="callers per pod (default: %(default)s)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of each call, s (default: %(default)s)")
    p.add_argument("--profiles", default=",".join(jitter.PROFILES),
                   help="comma-separated caller network profiles (default: %(default)s)")
    p.add_argument("--workers", type=int, default=1, help="client processes (default: %(default)s)")
    p.add_argument("--out", help="JSON report path (default: none)")
    p.add_argument("--plot", help="PNG path: latency above the ideal per profile, old vs new (default: none)")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    p = build_parser()
    a = p.parse_args(argv)
    a.profiles = a.profiles.split(",")
    bad = [name for name in a.profiles if name not in jitter.PROFILES]
    if bad:
        p.error(f"--profiles: {bad[0]!r} is not one of {', '.join(jitter.PROFILES)}")
    if a.sessions < 1 or a.seconds <= 0:
        p.error("--sessions must be >= 1 and --seconds > 0")
    return a


def summary(level: level_mod.Level) -> dict[str, object]:
    """One variant's figures under one profile: what the issue's targets read."""
    return {
        "above_ideal_ms": level.echo_above_floor_ms,
        "budget_ms": level.budget_ms,
        "caller_dry_ms_per_session": level.echo_underrun_ms.mean,
        "caller_lost_per_session": level.echo_lost.mean,
        "late_p99_ms": level.late_ms.p99,
        "first_audio_p50_ms": level.first_audio_ms.p50,
        "first_reaction_p50_ms": level.first_reaction_ms.p50,
        "cpu_us_per_frame": level.cpu_us_per_frame,
        "client_limited": level.client_limited,
        "ok": level.ok == level.sessions,
    }


async def run(a: argparse.Namespace) -> dict[str, object]:
    """Both pods up, every profile run against both at once, the pods stopped."""
    pods = {}
    try:
        for name, flags in VARIANTS.items():
            port = duplex.free_port()
            pods[name] = target_mod.start(name, f"http://127.0.0.1:{port}/v1", [
                sys.executable, "-m", "liveplex.cli", "serve", "--engine", "sim", "--port", str(port),
                "--max-sessions", str(2 * a.sessions), *flags])
        for pod in pods.values():
            await pod.wait_ready()
        new, old = pods["adaptive"], pods["fixed"]
        results: dict[str, object] = {}
        for profile in a.profiles:
            settings = duplex.parse([
                "--base-url", new.base_url, "--server-pid", str(new.pid), "--vs-url", old.base_url,
                "--vs-pid", str(old.pid), "--sessions", str(a.sessions), "--seconds", str(a.seconds),
                "--workers", str(a.workers), "--echo-rtt", "--jitter", profile, "--no-progress"])
            _, levels = await duplex.bench(settings)
            by_target = {lv.target: lv for lv in levels}
            results[profile] = {"adaptive": summary(by_target["pod"]), "fixed": summary(by_target["direct"])}
        return {"sessions": a.sessions, "seconds": a.seconds, "variants": VARIANTS, "profiles": results}
    finally:
        for pod in pods.values():
            pod.stop()


def render(report: dict[str, object]) -> str:
    """The table printed at the end."""
    lines = [f"{'profile':<10} {'pod':<9} {'above ideal p50/p99 ms':>24} {'dry ms/call':>12} {'lost/call':>10} "
             f"{'late p99':>9} {'1st audio':>10} {'1st reaction':>13}"]
    profiles = report["profiles"]
    assert isinstance(profiles, dict)
    for profile, variants in profiles.items():
        for name, s in variants.items():
            above = s["above_ideal_ms"] or {"p50": float("nan"), "p99": float("nan")}
            lines.append(f"{profile:<10} {name:<9} {above['p50']:>11.1f} / {above['p99']:>9.1f} "
                         f"{s['caller_dry_ms_per_session']:>12.1f} {s['caller_lost_per_session']:>10.2f} "
                         f"{s['late_p99_ms']:>9.2f} {s['first_audio_p50_ms']:>10.1f} "
                         f"{s['first_reaction_p50_ms']:>13.1f}"
                         + ("  CLIENT-LIMITED" if s["client_limited"] else ""))
    lines.append("where the mean above the ideal went, ms (buffer wait, tick lateness, tick compute, "
                 "network + pumps + pacing):")
    for profile, variants in profiles.items():
        for name, s in variants.items():
            b = s.get("budget_ms")
            if b:
                lines.append(f"{profile:<10} {name:<9} {b['above_ideal_mean']:>7.1f} = {b['buffer_wait']:.1f} + "
                             f"{b['tick_lateness']:.1f} + {b['tick_compute']:.1f} + {b['network_pumps_pacing']:.1f}")
    return "\n".join(lines)


def plot(path: str, report: dict[str, object]) -> None:
    """Grouped bars: p50 and p99 above the ideal per profile, the old buffer beside the new."""
    plot_mod.backend()
    from matplotlib import pyplot

    profiles = report["profiles"]
    assert isinstance(profiles, dict)
    names = list(profiles)
    fig, ax = pyplot.subplots(figsize=(8, 4.5))
    width = 0.2
    for i, (variant, pct) in enumerate([(v, p) for v in VARIANTS for p in ("p50", "p99")]):
        values = [(profiles[n][variant]["above_ideal_ms"] or {}).get(pct, 0.0) for n in names]
        ax.bar([x + (i - 1.5) * width for x in range(len(names))], values, width,
               label=f"{variant} {pct}", hatch="//" if pct == "p99" else None,
               color="tab:blue" if variant == "adaptive" else "tab:orange", alpha=0.6 if pct == "p99" else 1.0)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("echo round trip above the ideal (ms)")
    ax.set_title(f"caller buffer: adaptive vs fixed prebuffer 2, {report['sessions']} calls per pod")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str]) -> int:
    a = parse(argv)
    if a.plot:
        plot_mod.backend()  # a missing extra is said now, not after the run
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = loop.run(run(a))
    except target_mod.TargetError as exc:
        print(f"liveplex bench latency: {exc}", file=sys.stderr)
        return 1
    print(render(report))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    if a.plot:
        plot(a.plot, report)
    return 0
