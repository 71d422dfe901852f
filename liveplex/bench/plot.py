"""The report's PNG: frame-lateness p99, stalled sessions and, with `--echo-rtt`, the echo round
trip against its floor, against sessions, per server."""

from __future__ import annotations

from liveplex import cli
from liveplex.bench import level as level_mod


def backend() -> None:
    """matplotlib on its Agg backend (files, no display), or `MissingExtra`: the `bench` extra brings
    it. A run given `--plot` calls this before it starts, so a missing extra costs no run."""
    with cli.needs("bench"):
        import matplotlib
    matplotlib.use("Agg")


def write(path: str, levels: list[level_mod.Level], title: str) -> None:
    """Draw every target's levels into one PNG at `path`."""
    backend()
    from matplotlib import pyplot, ticker

    echo = any(level.echo_rtt_ms.count for level in levels)
    fig, axes = pyplot.subplots(3 if echo else 2, 1, figsize=(7, 9 if echo else 6), sharex=True)
    late_ax, stall_ax = axes[0], axes[1]
    for target in dict.fromkeys(level.target for level in levels):
        mine = [level for level in levels if level.target == target]
        xs = [level.sessions for level in mine]
        late_ax.plot(xs, [level.late_ms.p99 for level in mine], marker="o", label=target)
        stall_ax.plot(xs, [level.underrun_sessions for level in mine], marker="o", label=target)
        if echo:
            line = axes[2].plot(xs, [level.echo_rtt_ms.p50 for level in mine], marker="o", label=f"{target} p50")
            color = line[0].get_color()
            axes[2].plot(xs, [level.echo_rtt_ms.p99 for level in mine], marker="^", linestyle=":", color=color,
                         label=f"{target} p99")
            if mine[0].echo_floor_ms is not None:
                axes[2].axhline(mine[0].echo_floor_ms, color=color, linestyle="--", linewidth=1,
                                label=f"{target} floor")
    late_ax.set_ylabel("frame lateness p99 (ms)")
    late_ax.set_ylim(bottom=0)
    late_ax.legend()
    late_ax.grid(True, alpha=0.3)
    stall_ax.set_ylabel(f"sessions stalled > {level_mod.UNDERRUN_LIMIT_MS:g} ms")
    stall_ax.set_ylim(bottom=0)
    stall_ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    stall_ax.grid(True, alpha=0.3)
    if echo:
        axes[2].set_ylabel("echo round trip (ms)")
        axes[2].set_ylim(bottom=0)
        axes[2].legend(fontsize="small")
        axes[2].grid(True, alpha=0.3)
    axes[-1].set_xlabel("concurrent sessions")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
