"""The report's PNG: frame-lateness p99 and stalled sessions against sessions, per server."""

from __future__ import annotations

from liveplex.bench import level as level_mod


def write(path: str, levels: list[level_mod.Level], title: str) -> None:
    """Draw every target's levels into one PNG at `path` (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot, ticker

    fig, (late_ax, stall_ax) = pyplot.subplots(2, 1, figsize=(7, 6), sharex=True)
    for target in dict.fromkeys(level.target for level in levels):
        mine = [level for level in levels if level.target == target]
        xs = [level.sessions for level in mine]
        late_ax.plot(xs, [level.late_ms.p99 for level in mine], marker="o", label=target)
        stall_ax.plot(xs, [level.underrun_sessions for level in mine], marker="o", label=target)
    late_ax.set_ylabel("frame lateness p99 (ms)")
    late_ax.set_ylim(bottom=0)
    late_ax.legend()
    late_ax.grid(True, alpha=0.3)
    stall_ax.set_ylabel(f"sessions stalled > {level_mod.UNDERRUN_LIMIT_MS:g} ms")
    stall_ax.set_xlabel("concurrent sessions")
    stall_ax.set_ylim(bottom=0)
    stall_ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    stall_ax.grid(True, alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    pyplot.close(fig)
