"""The report's PNG."""

from __future__ import annotations

import array
import pathlib

from liveplex.bench import caller, level, plot


def _level(target: str, sessions: int, late_us: int) -> level.Level:
    result = caller.CallResult(ok=True, started_ms=1.0, close_reason="close_requested", frames=1,
                               lateness_us=array.array("q", [late_us]))
    return level.judge(target, [result] * sessions, None, None, None, None)


def test_plot_writes_a_png_with_a_line_per_target(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "report.png"
    levels = [_level("pod", 2, 1000), _level("baseline-json", 2, 500), _level("pod", 4, 9000)]
    plot.write(str(path), levels, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_adds_the_echo_round_trip_panel_with_echo_rtt(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "echo.png"
    result = caller.CallResult(ok=True, started_ms=1.0, close_reason="close_requested", frames=1,
                               lateness_us=array.array("q", [0]), echo_rtt_us=array.array("q", [600_000]))
    levels = [level.judge("pod", [result], None, None, None, None, 560.0),
              level.judge("baseline-json", [result], None, None, None, None, 0.0)]
    plot.write(str(path), levels, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
