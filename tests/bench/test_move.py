"""`bench move`'s verdict on made-up calls, and its flags."""

from __future__ import annotations

import array

import pytest

from liveplex.bench import caller, move

SETTINGS = move.MoveSettings("http://127.0.0.1:1/v1", None, 2, 8.0, ("http://127.0.0.1:2",), 3.0, 30.0, 20, 1, None)
DRAINED = [{"pod": "http://127.0.0.1:2", "seconds": 0.4, "drained": True, "ended_at_deadline": 0}]


DRAIN_NS = 10_000_000_000


def _call(gaps_ms: list[float], skipped: int = 0, repeated: int = 0, error: str | None = None) -> caller.CallResult:
    """A call whose deltas arrive `gaps_ms` apart, the drain asked after its 150th."""
    arrivals = [DRAIN_NS - 150 * 80_000_000 - 1]
    for ms in gaps_ms:
        arrivals.append(arrivals[-1] + int(ms * 1e6))
    return caller.CallResult(
        ok=error is None,
        error=error,
        lateness_us=array.array("q", [0] * len(gaps_ms)),
        arrivals_ns=array.array("q", arrivals),
        echo_skipped=skipped,
        echo_repeated=repeated,
    )


STEADY = [80.0] * 150 + [85.0] * 50  # the drain falls in the second stretch


def test_calls_that_moved_unnoticed_are_clean() -> None:
    result = move.report(SETTINGS, [_call(STEADY + [140.0] + STEADY), _call(STEADY)], DRAINED, DRAIN_NS)
    assert result["clean"] and result["ok"] == 2 and result["stamps_skipped"] == 0
    assert result["steady_gap_ms"]["p99"] == 80.0  # before the drain only, settling left out
    assert result["longest_gap_after_drain_ms"]["max"] == 140.0
    assert result["worst_gap_over_steady_p99_ms"] == 60.0


def test_a_lost_frame_a_repeated_one_a_long_gap_or_a_call_cut_at_the_deadline_is_not_clean() -> None:
    assert not move.report(SETTINGS, [_call(STEADY, skipped=1), _call(STEADY)], DRAINED, DRAIN_NS)["clean"]
    assert not move.report(SETTINGS, [_call(STEADY, repeated=1), _call(STEADY)], DRAINED, DRAIN_NS)["clean"]
    long_gap = STEADY + [80.0 + move.GAP_SLACK_MS + 1]
    gap = move.report(SETTINGS, [_call(long_gap), _call(STEADY)], DRAINED, DRAIN_NS)
    assert not gap["clean"] and gap["worst_gap_over_steady_p99_ms"] > move.GAP_SLACK_MS
    never = move.report(SETTINGS, [_call(long_gap), _call(STEADY)], DRAINED, DRAIN_NS * 10)
    assert never["steady_gap_ms"]["max"] > 160.0 and not never["clean"]  # a gap before the drain is no move's
    failed = move.report(SETTINGS, [_call(STEADY, error="session closed: connection_lost"), _call(STEADY)],
                         DRAINED, DRAIN_NS)
    assert not failed["clean"] and failed["errors"] == ["session closed: connection_lost"]
    cut = [{**DRAINED[0], "ended_at_deadline": 1}]
    assert not move.report(SETTINGS, [_call(STEADY), _call(STEADY)], cut, DRAIN_NS)["clean"]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--drain", "http://h:1", "--sessions", "0"], "--sessions"),
        (["--drain", "http://h:1", "--drain-at-s", "9", "--seconds", "8"], "--drain-at-s"),
        (["--drain", "h:1"], "--drain"),
    ],
)
def test_bad_flags_are_refused_by_name(argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        move.parse(argv)
    assert exit_.value.code == 2 and named in capsys.readouterr().err
