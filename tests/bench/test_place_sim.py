"""`bench place --simulate` runs end to end on a small pool: its figures are reported, never asserted
as speeds; what is asserted is that it measured what it says and that the audit can see."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from liveplex.bench import place_sim


def test_a_small_simulated_pool_is_measured_and_audited(redis_url: str, tmp_path) -> None:
    out = tmp_path / "sim.json"
    done = subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "place", "--simulate", "--pods", "6",
                           "--capacity", "4", "--rate", "200", "--seconds", "1", "--hold", "0.2", "--concurrency", "2",
                           "--decision-rounds", "40", "--redis-url", redis_url, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["outcomes"]["placed"] > 50
    assert report["place_ms"]["count"] == report["outcomes"]["placed"] + report["outcomes"]["busy"]
    assert report["heartbeat_ms"]["count"] > 20  # the probe beats every 10 ms
    assert report["pods_process"]["accepted"] == report["outcomes"]["placed"]
    assert report["pods_process"]["heartbeats"] >= 6 * 2  # every pod, twice a second
    assert report["audit"] == {"overbooked": 0, "over_cap": [], "fewest_members": 7, "members_expected": 7,
                               "ok": True}
    assert report["redis"]["cpu_placing"] > report["redis"]["cpu_heartbeats_only"] > 0
    assert report["decision"]["rounds"] == 40 and report["decision"]["redis_cpu_us"] > 0
    refresh = report["decision"]["gateway_refresh"]
    assert refresh["summary"]["reads"] == refresh["snapshot"]["reads"] == 20
    assert report["redis"]["heartbeats_per_s"]["target"] == 12 and report["redis"]["cpu_us_per_heartbeat"] > 0


def test_bad_plans_name_their_parameter(redis_url: str) -> None:
    with pytest.raises(ValueError, match="--pods"):
        place_sim.Plan(redis_url, 0, 4, 100, 1, 0.1, 1, 10)
    with pytest.raises(ValueError, match="--rate"):
        place_sim.Plan(redis_url, 4, 4, 0, 1, 0.1, 1, 10)
    done = subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "place", "--seconds", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--base-url" in done.stderr
    done = subprocess.run([sys.executable, "-m", "liveplex.cli", "bench", "place", "--simulate", "--pods", "0",
                           "--redis-url", redis_url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--pods" in done.stderr
