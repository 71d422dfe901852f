"""`liveplex bench latency` (issue 31): both pods, every profile, the old buffer beside the new."""

from __future__ import annotations

import json

import pytest

from liveplex.bench import jitter, latency


def test_profiles_are_seeded_schedules_that_keep_the_chunks_in_order() -> None:
    for profile in jitter.PROFILES:
        late = jitter.offsets(profile, 20, 1500, seed=3)
        assert late == jitter.offsets(profile, 20, 1500, seed=3) and min(late) >= 0
        sends = [k * 20_000_000 + d for k, d in enumerate(late)]
        assert sends == sorted(sends)
    assert set(jitter.offsets("none", 20, 100, 0)) == {0}
    assert max(jitter.offsets("uniform20", 20, 1500, 0)) < 40_000_000
    stalls = jitter.offsets("stall300", 20, 1500, 0)  # 30 s: three stalls of 15 chunks each
    assert sum(1 for d in stalls if d > 0) == 45 and max(stalls) <= 300_000_000
    late = jitter.offsets("late50", 20, 1500, 0)  # 30 s: 0-50 ms late, and six 100 ms holds
    held = [k for k, d in enumerate(late) if d >= 50_000_000]  # only a hold makes a chunk 50 ms late
    assert sum(1 for k in held if k - 1 not in held) == 6 and max(late) <= 100_000_000
    assert 20_000_000 < sum(late) / len(late) < 35_000_000
    with pytest.raises(ValueError, match="jitter profile"):
        jitter.offsets("lossy", 20, 10, 0)


def test_bad_arguments_name_the_flag(capsys) -> None:
    for argv, flag in ((["--profiles", "none,lossy"], "--profiles"), (["--sessions", "0"], "--sessions")):
        with pytest.raises(SystemExit):
            latency.parse(argv)
        assert flag in capsys.readouterr().err


def test_the_adaptive_pod_answers_nearer_the_ideal_than_the_fixed_one(tmp_path) -> None:
    out, png = tmp_path / "latency.json", tmp_path / "latency.png"
    assert latency.main(["--sessions", "3", "--seconds", "2", "--profiles", "none",
                         "--out", str(out), "--plot", str(png)]) == 0
    report = json.loads(out.read_text())
    new, old = report["profiles"]["none"]["adaptive"], report["profiles"]["none"]["fixed"]
    assert new["ok"] and old["ok"]
    # the fixed prebuffer of 2 holds every frame a tick more, then waits for the shared tick
    assert new["above_ideal_ms"]["p50"] + 40 < old["above_ideal_ms"]["p50"]
    assert old["above_ideal_ms"]["p50"] >= 80
    assert png.stat().st_size > 10_000
