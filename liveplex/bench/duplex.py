"""`liveplex bench duplex`: N real-time GPT-Live callers against a server, level by level.

Each level runs N sessions (`caller`) spread over client processes (`pool`), pools what they
measured (`level`), prints a table and moves on; a ramp stops at the first level that is not
clean, and its last clean level is the measured capacity (live-contract §13). With
`--vs-baseline` the bench also starts `liveplex bench baseline` and runs every level against the
pod and then the baseline, reporting both capacities, their ratio and the server CPU per frame
pair of each (performance.md §3.2).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import socket
import sys

import orjson

from liveplex import listen
from liveplex.bench import audio, caller, jitter, loop, plot, progress, roundtrip, table, talk
from liveplex.bench import level as level_mod
from liveplex.bench import pool as pool_mod
from liveplex.bench import target as target_mod
from liveplex.live import frames

logger = logging.getLogger(__name__)

LEVEL_PAUSE_S = 1.0
"""Pause between levels, so one level's closing sessions do not load the next (§13.5)."""

EXIT_FAILED = 2
"""Exit status when any level had failed sessions (§13.5)."""

EXIT_UNREACHABLE = 1
"""Exit status when a server could not be reached or started."""

EXIT_UNCLEAN = 3
"""Exit status with `--strict` when a level was not clean but none had failed sessions (CI)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DuplexSettings:
    """Everything one `bench duplex` run is told; built once by `parse`."""

    base_url: str
    """The pod's SDK-style base URL."""
    model: str | None
    """`session.model`; None: the first id of the pod's `GET /v1/models`."""
    voice: str | None
    instructions: str | None
    rate: int
    """Sample rate in Hz of the session format."""
    audio_format: str
    levels: tuple[int, ...]
    """Sessions per level, in run order."""
    seconds: float
    """Caller audio per session, in seconds."""
    source: audio.Source
    chunk_ms: int
    stagger_ms: int
    """Session i of a level starts i · stagger_ms after the level begins."""
    playout_ms: int
    late_p99_ms: float | None
    """When set, a level is clean only if its pooled lateness p99 is within it (ms)."""
    workers: int
    """Client processes; 1 runs the sessions in the bench's own process."""
    out: str | None
    plot: str | None
    label: str
    vs_baseline: str | None
    """Baseline variant ("json" or "raw") to measure side by side, or None."""
    baseline_port: int
    """Port of the baseline server; 0 picks a free one."""
    server_pid: int | None
    """The pod's pid for CPU sampling, when the bench did not start it."""
    serve_cmd: str | None
    """A command that starts the pod; the bench runs it, waits for it and stops it at the end."""
    show_progress: bool
    strict: bool
    """Exit 3 when a level was not clean (for CI, issue 3 item 5)."""
    vs_url: str | None = None
    """A second running server measured side by side at every level (e.g. the pod behind the
    gateway under test), compared like the baseline."""
    vs_pid: int | None = None
    """Its pid, for its CPU per frame."""
    echo_rtt: bool = False
    """Stamp the caller's frames and time each echo against the server's floor (`roundtrip`)."""
    jitter: str = "none"
    """The callers' network profile (`bench.jitter`)."""
    talk: str = "continuous"
    """How much of each minute the callers speak (`bench.talk`)."""
    stats_url: str | None = None
    """Read the pod's `/live/stats` here rather than at `base_url` (a pod behind the gateway under
    test: the pod's ticks, pauses and wakes are its own)."""
    store: bool = False
    """Start every call with `store: true` (a gateway with `--store-dir`, issue 45)."""

    def call_settings(self, model: str, url: str) -> caller.CallSettings:
        """What each session of a level against `url` is told."""
        return caller.CallSettings(
            url=url, model=model, voice=self.voice, instructions=self.instructions,
            audio_format=self.audio_format, rate=self.rate, seconds=self.seconds,
            chunk_ms=self.chunk_ms, playout_ms=self.playout_ms, echo_rtt=self.echo_rtt, jitter=self.jitter,
            talk=self.talk, store=self.store,
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="liveplex bench duplex", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--base-url", default=listen.DEFAULT_BASE_URL,
                   help="the server's /v1 base (default: %(default)s)")
    p.add_argument("--model", help="model to start (default: the first of GET /v1/models)")
    p.add_argument("--voice", help="voice to start with (default: the server's)")
    p.add_argument("--instructions", help="role prompt (default: the server's)")
    p.add_argument("--rate", type=int, default=24000, help="audio sample rate, Hz (default: %(default)s)")
    p.add_argument("--format", dest="audio_format", choices=audio.FORMATS, default="audio/pcm",
                   help="audio format (default: %(default)s)")
    p.add_argument("--sessions", type=int, default=8,
                   help="concurrent sessions; ignored with --ramp (default: %(default)s)")
    p.add_argument("--ramp", type=_levels, help="comma-separated levels, e.g. 8,32,64 (default: one level, --sessions)")
    p.add_argument("--seconds", type=float, default=20.0, help="length of each call, s (default: %(default)s)")
    p.add_argument("--input", help=f"mono 16-bit WAV (looped) or '{audio.SYNTHETIC}' "
                                   "(default: the shipped speech recording)")
    p.add_argument("--chunk-ms", type=int, default=20, help="caller audio per append, ms (default: %(default)s)")
    p.add_argument("--jitter", choices=jitter.PROFILES, default="none",
                   help="the callers' network: when each chunk leaves against its deadline (default: %(default)s)")
    p.add_argument("--caller", dest="talk", choices=tuple(talk.PROFILES), default="continuous",
                   help="how much of each minute the callers speak: speak5of60 is 5 s of the input then 55 s "
                        "of silence, for a pod's idle pause (needs audio/pcm at 24000 Hz and real speech) "
                        "(default: %(default)s)")
    p.add_argument("--stats-url", default=None, metavar="BASE_URL",
                   help="read the pod's /live/stats here, e.g. the pod behind the --base-url gateway "
                        "(default: --base-url's)")
    p.add_argument("--store", action="store_true",
                   help="start every call with store: true, for a gateway that stores calls (default: off)")
    p.add_argument("--stagger-ms", type=int, default=20, help="between session starts, ms (default: %(default)s)")
    p.add_argument("--playout-ms", type=int, default=120,
                   help="the caller's playout buffer, ms: later frames count as late (default: %(default)s)")
    p.add_argument("--late-p99-ms", type=float,
                   help="a level is clean only with p99 lateness under this (default: the playout buffer)")
    p.add_argument("--workers", "--procs", type=int, default=1, help="client processes (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic input (default: %(default)s)")
    p.add_argument("--out", help="JSON report path (default: none)")
    p.add_argument("--plot", help="PNG plot path (default: none)")
    p.add_argument("--label", default="", help="name of the run in the report (default: none)")
    p.add_argument("--vs-baseline", nargs="?", const="json", choices=("json", "raw"),
                   help="also measure `bench baseline` (json when given bare) at every level (default: off)")
    p.add_argument("--baseline-port", type=int, default=0, help="port of the baseline (default: a free one)")
    p.add_argument("--vs-url", default=None, metavar="BASE_URL",
                   help="also measure this running server at every level, e.g. the pod directly against "
                        "--base-url a gateway in front of it (default: none)")
    p.add_argument("--vs-pid", type=int, default=None,
                   help="the --vs-url server's pid, for its CPU per frame (default: none)")
    p.add_argument("--server-pid", type=int, help="the pod's pid, for its CPU per frame (default: none)")
    p.add_argument("--serve-cmd", help="start the pod with this command and stop it at the end (default: none)")
    p.add_argument("--echo-rtt", action="store_true",
                   help="stamp each caller frame and time its echo, against the server's floor "
                        "(prebuffer + echo - 1 frames; needs audio/pcm at 24000 Hz and an echoing server: "
                        "the sim, the baseline) (default: off)")
    p.add_argument("--no-progress", action="store_true", help="no progress line (default: shown)")
    p.add_argument("--strict", action="store_true",
                   help=f"exit {EXIT_UNCLEAN} if any level was not clean, for CI (default: off)")
    return p


def parse(argv: list[str]) -> DuplexSettings:
    """Parse the command line; argparse exits with status 2 naming a bad flag."""
    p = build_parser()
    a = p.parse_args(argv)
    for flag, value in (("--seconds", a.seconds), ("--chunk-ms", a.chunk_ms),
                        ("--rate", a.rate), ("--workers", a.workers), ("--sessions", a.sessions)):
        if value <= 0:
            p.error(f"{flag} must be > 0, got {value}")
    if a.chunk_ms * a.rate % 1000:
        p.error(f"--chunk-ms {a.chunk_ms} is not a whole number of samples at {a.rate} Hz")
    if a.server_pid is not None and a.serve_cmd is not None:
        p.error("give --server-pid or --serve-cmd, not both")
    if a.vs_url is not None and a.vs_baseline is not None:
        p.error("give --vs-url or --vs-baseline, not both")
    if a.echo_rtt and (a.audio_format, a.rate) != ("audio/pcm", frames.SAMPLE_RATE):
        p.error(f"--echo-rtt needs --format audio/pcm at --rate {frames.SAMPLE_RATE}: the frame stamps "
                f"must come back byte for byte, and {a.audio_format} at {a.rate} Hz is converted on the way")
    if a.talk != "continuous" and (a.audio_format, a.rate) != ("audio/pcm", frames.SAMPLE_RATE):
        p.error(f"--caller {a.talk} needs --format audio/pcm at --rate {frames.SAMPLE_RATE}: its frame stamps "
                "must come back byte for byte")
    if a.talk != "continuous" and a.echo_rtt:
        p.error(f"--caller {a.talk} and --echo-rtt both stamp the frames: --echo-rtt's full-scale stamp would "
                "lift every silent frame over the detector's gate (the quiet caller has its own: wake ms, pre-roll ms)")
    synthetic = a.input == audio.SYNTHETIC
    return DuplexSettings(
        base_url=a.base_url, model=a.model, voice=a.voice, instructions=a.instructions,
        rate=a.rate, audio_format=a.audio_format,
        levels=tuple(a.ramp) if a.ramp else (a.sessions,), seconds=a.seconds,
        source=audio.Source(None if synthetic else a.input, synthetic, a.seed),
        chunk_ms=a.chunk_ms, stagger_ms=a.stagger_ms, playout_ms=a.playout_ms,
        late_p99_ms=a.late_p99_ms, workers=a.workers, out=a.out, plot=a.plot, label=a.label,
        vs_baseline=a.vs_baseline, baseline_port=a.baseline_port, server_pid=a.server_pid,
        serve_cmd=a.serve_cmd, show_progress=not a.no_progress, strict=a.strict,
        vs_url=a.vs_url, vs_pid=a.vs_pid, echo_rtt=a.echo_rtt, jitter=a.jitter, talk=a.talk,
        stats_url=a.stats_url, store=a.store,
    )


def _levels(text: str) -> list[int]:
    levels = [int(part) for part in text.split(",") if part.strip()]
    if not levels or min(levels) <= 0:
        raise argparse.ArgumentTypeError(f"levels must be positive integers, got {text!r}")
    return levels


async def run_level(
    pool: pool_mod.Pool,
    target: target_mod.Target,
    settings: caller.CallSettings,
    source: audio.Source,
    sessions: int,
    stagger_ms: int,
    late_p99_ms: float | None = None,
    show_progress: bool = False,
    echo_floor_ms: float | None = None,
) -> tuple[level_mod.Level, list[caller.CallResult]]:
    """Run one level of `sessions` sessions against `target` and judge it (`echo_floor_ms`: the
    target's echo floor, with `--echo-rtt`)."""
    stats_before = await target.stats()
    cpu_before = target.cpu_s()
    shown = None
    if show_progress:
        shown = asyncio.create_task(progress.show(f"{target.name} {sessions}", sessions, pool.counts))
    try:
        results = await pool.run(settings, source, sessions, stagger_ms * 1_000_000)
    finally:
        if shown is not None:
            shown.cancel()
            await asyncio.gather(shown, return_exceptions=True)
    cpu_after = target.cpu_s()
    stats_after = await target.stats()
    cpu_s = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    verdict = level_mod.judge(target.name, results, late_p99_ms, stats_before, stats_after, cpu_s, echo_floor_ms)
    return verdict, results


def compare(pod: list[level_mod.Level], base: list[level_mod.Level]) -> dict[str, object]:
    """Capacities, their ratio, and CPU per frame pair at the largest level both ran clean."""
    pod_cap, base_cap = level_mod.largest_clean(pod), level_mod.largest_clean(base)
    both = {lv.sessions: lv for lv in base if lv.clean}
    common = [(lv, both[lv.sessions]) for lv in pod if lv.clean and lv.sessions in both]
    at = common[-1] if common else None
    pod_cpu = at[0].cpu_us_per_frame if at else None
    base_cpu = at[1].cpu_us_per_frame if at else None
    return {
        "pod_capacity": pod_cap,
        "baseline_capacity": base_cap,
        "capacity_ratio": pod_cap / base_cap if pod_cap and base_cap else None,
        "cpu_at_sessions": at[0].sessions if at else None,
        "pod_cpu_us_per_frame": pod_cpu,
        "baseline_cpu_us_per_frame": base_cpu,
        "cpu_ratio": pod_cpu / base_cpu if pod_cpu and base_cpu else None,
    }


def render_comparison(comparison: dict[str, object]) -> str:
    """The `--vs-baseline` summary lines."""
    ratio = comparison["capacity_ratio"]
    lines = [f"capacity: pod {comparison['pod_capacity']} vs baseline "
             f"{comparison['baseline_capacity']}, ratio "
             + (f"{ratio:.2f}" if isinstance(ratio, float) else "n/a")]
    if comparison["cpu_at_sessions"] is not None:
        pod_cpu, base_cpu = comparison["pod_cpu_us_per_frame"], comparison["baseline_cpu_us_per_frame"]
        cpu_ratio = comparison["cpu_ratio"]
        lines.append(
            f"server CPU per frame pair at {comparison['cpu_at_sessions']} sessions: pod "
            + (f"{pod_cpu:.1f} µs" if isinstance(pod_cpu, float) else "n/a (no pid)")
            + ", baseline " + (f"{base_cpu:.1f} µs" if isinstance(base_cpu, float) else "n/a")
            + (f", ratio {cpu_ratio:.2f}" if isinstance(cpu_ratio, float) else "")
        )
    return "\n".join(lines)


def exit_code(levels: list[level_mod.Level], strict: bool) -> int:
    """2 if any level had failed sessions; with `strict`, 3 if any level was not clean; else 0."""
    if any(lv.failed for lv in levels):
        return EXIT_FAILED
    if strict and not all(lv.clean for lv in levels):
        return EXIT_UNCLEAN
    return 0


async def bench(settings: DuplexSettings) -> tuple[dict[str, object], list[level_mod.Level]]:
    """Run every level against every target; return the JSON report and the levels in run
    order."""
    targets: list[target_mod.Target] = []
    try:
        pod = await _pod(settings)
        targets.append(pod)
        model = settings.model or (await pod.models() or ["gpt-live-1"])[0]
        if settings.vs_baseline is not None:
            port = settings.baseline_port or free_port()
            base = target_mod.start(f"baseline-{settings.vs_baseline}", f"http://127.0.0.1:{port}/v1",
                                    target_mod.baseline_argv(settings.vs_baseline, port))
            targets.append(base)
            await base.wait_ready()
        if settings.vs_url is not None:
            targets.append(target_mod.Target("direct", settings.vs_url, settings.vs_pid))
        return await _ramp(settings, targets, model)
    finally:
        for target in targets:
            target.stop()


async def _pod(settings: DuplexSettings) -> target_mod.Target:
    """The pod under test: started by the bench with `--serve-cmd`, or already running."""
    if settings.serve_cmd is not None:
        pod = target_mod.start_shell("pod", settings.base_url, settings.serve_cmd)
        await pod.wait_ready()
    else:
        pod = target_mod.Target("pod", settings.base_url, settings.server_pid)
    pod.stats_url = settings.stats_url
    return pod


async def _ramp(
    settings: DuplexSettings, targets: list[target_mod.Target], model: str
) -> tuple[dict[str, object], list[level_mod.Level]]:
    """Alternate targets at each level; each target stops at its first unclean level."""
    levels: dict[str, list[level_mod.Level]] = {t.name: [] for t in targets}
    records: list[list[dict[str, object]]] = []
    going = list(targets)
    floors = {t.name: roundtrip.floor_of(await t.config()) for t in targets} if settings.echo_rtt else {}
    for name, floor in floors.items():
        print(f"[{name}] echo floor {floor.ms:g} ms ({floor.source})", flush=True)
    with pool_mod.Pool(settings.workers) as pool:
        for sessions in settings.levels:
            for target in list(going):
                verdict, results = await run_level(
                    pool, target, settings.call_settings(model, target.sessions_url),
                    settings.source, sessions, settings.stagger_ms, settings.late_p99_ms,
                    settings.show_progress, floors[target.name].ms if floors else None,
                )
                print(table.render_level(verdict), flush=True)
                levels[target.name].append(verdict)
                records.append([r.record() for r in results])
                if not verdict.clean:
                    going.remove(target)
                await asyncio.sleep(LEVEL_PAUSE_S)
            if not going:
                break
    ordered = _interleaved(levels)
    report: dict[str, object] = {
        "config": _config(settings, model),
        "levels": [lv.as_dict() for lv in ordered],
        "largest_clean": level_mod.largest_clean(levels["pod"]),
        "records": records,
    }
    if floors:
        report["echo_rtt_floor"] = {name: floor.as_dict() for name, floor in floors.items()}
    for target in targets:
        print(table.render_capacity(target.name, level_mod.largest_clean(levels[target.name])))
    if len(targets) > 1:
        comparison = compare(levels["pod"], levels[targets[1].name])
        report["comparison"] = {"baseline": targets[1].name, **comparison}
        print(render_comparison(comparison))
    if settings.plot:
        plot.write(settings.plot, ordered, settings.label or "liveplex bench duplex")
    return report, ordered


def _interleaved(levels: dict[str, list[level_mod.Level]]) -> list[level_mod.Level]:
    """Levels in the order they ran: level by level, pod first."""
    runs = list(levels.values())
    return [run[i] for i in range(max(map(len, runs))) for run in runs if i < len(run)]


def _config(settings: DuplexSettings, model: str) -> dict[str, object]:
    return {
        "base_url": settings.base_url, "model": model, "voice": settings.voice,
        "levels": list(settings.levels), "seconds": settings.seconds,
        "input": settings.source.describe(), "chunk_ms": settings.chunk_ms,
        "stagger_ms": settings.stagger_ms, "playout_ms": settings.playout_ms,
        "seed": settings.source.seed, "rate": settings.rate,
        "format": settings.audio_format, "late_p99_ms": settings.late_p99_ms,
        "workers": settings.workers, "vs_baseline": settings.vs_baseline, "label": settings.label,
        "echo_rtt": settings.echo_rtt, "caller": settings.talk, "stats_url": settings.stats_url,
        "store": settings.store,
    }


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server the bench starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str]) -> int:
    """`liveplex bench duplex ...`; the exit status is `exit_code`'s, or 1 if a server could not
    be reached or started."""
    settings = parse(argv)
    if settings.plot:
        plot.backend()  # a missing extra is said now, not after the run
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        report, levels = loop.run(bench(settings))
    except (target_mod.TargetError, audio.AudioError) as exc:
        print(f"liveplex bench duplex: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if settings.out:
        with open(settings.out, "wb") as f:
            f.write(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return exit_code(levels, settings.strict)
