"""The per-level block: the echo round trip's row and its distance above the floor."""

from __future__ import annotations

import array

from liveplex.bench import caller, level, table


def _level(echo_us: list[int], floor_ms: float | None) -> level.Level:
    result = caller.CallResult(ok=True, started_ms=1.0, close_reason="close_requested", frames=1,
                               lateness_us=array.array("q", [0]), echo_rtt_us=array.array("q", echo_us))
    return level.judge("pod", [result], None, None, None, None, floor_ms)


def test_the_echo_row_and_its_floor_show_only_with_echo_rtt() -> None:
    assert "echo" not in table.render_level(_level([], None))
    block = table.render_level(_level([610_000, 650_000], 560.0))
    assert "  echo rtt ms     630.00  610.00  650.00  650.00   650.00" in block.splitlines()
    assert "echo ideal 560 ms: p50 +50.0 ms, p99 +90.0 ms above it (2 frames)" in block


def test_a_server_that_echoes_nothing_says_so() -> None:
    assert "no echo matched a sent frame" in table.render_level(_level([], 560.0))
