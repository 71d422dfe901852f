"""`bench move`'s verdict on made-up calls, and its flags."""

from __future__ import annotations

import array

import pytest

from liveplex.bench import caller, move

SETTINGS = move.MoveSettings("http://127.0.0.1:1/v1", None, 2, 8.0, ("http://127.0.0.1:2",), 3.0, 30.0, 20, 1, None)
DRAINED = [{"pod": "http://127.0.0.1:2", "seconds": 0.4, "drained": True, "ended_at_deadline": 0}]


def _call(lateness_ms: list[float], skipped: int = 0, repeated: int = 0, error: str | None = None) -> caller.CallResult:
    return caller.CallResult(
        ok=error is None,
        error=error,
        lateness_us=array.array("q", [int(ms * 1000) for ms in lateness_ms]),
        echo_skipped=skipped,
        echo_repeated=repeated,
    )


STEADY = [10.0] * 200


def test_calls_that_moved_unnoticed_are_clean() -> None:
    result = move.report(SETTINGS, [_call(STEADY + [60.0]), _call(STEADY)], DRAINED)
    assert result["clean"] and result["ok"] == 2 and result["stamps_skipped"] == 0
    assert result["worst_gap_over_p99_ms"] == 50.0


def test_a_lost_frame_a_repeated_one_a_long_gap_or_a_call_cut_at_the_deadline_is_not_clean() -> None:
    assert not move.report(SETTINGS, [_call(STEADY, skipped=1), _call(STEADY)], DRAINED)["clean"]
    assert not move.report(SETTINGS, [_call(STEADY, repeated=1), _call(STEADY)], DRAINED)["clean"]
    gap = move.report(SETTINGS, [_call(STEADY + [10.0 + move.GAP_SLACK_MS + 1]), _call(STEADY)], DRAINED)
    assert not gap["clean"] and gap["worst_gap_over_p99_ms"] > move.GAP_SLACK_MS
    failed = move.report(SETTINGS, [_call(STEADY, error="session closed: connection_lost"), _call(STEADY)], DRAINED)
    assert not failed["clean"] and failed["errors"] == ["session closed: connection_lost"]
    cut = [{**DRAINED[0], "ended_at_deadline": 1}]
    assert not move.report(SETTINGS, [_call(STEADY), _call(STEADY)], cut)["clean"]


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
