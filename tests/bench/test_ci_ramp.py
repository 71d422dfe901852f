"""The CI capacity ramp (issue 3 item 5): a real `liveplex serve`, 8 then 32 sessions for 5 s.

Runs after the checker's end-to-end tests in the default suite; fails if either level is not
clean (`--strict` exits 3 on an unclean level, 2 on failed sessions).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import servers

pytestmark = pytest.mark.timeout(240)


def test_ramp_8_then_32_sessions_is_clean_against_a_real_pod(tmp_path: Path) -> None:
    report = tmp_path / "ramp.json"
    with servers.serve(log=tmp_path / "serve.log") as base_url:
        done = subprocess.run(
            [sys.executable, "-m", "liveplex.cli", "bench", "duplex", "--base-url", base_url,
             "--ramp", "8,32", "--seconds", "5", "--strict", "--no-progress", "--out", str(report)],
            capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stdout + done.stderr
    levels = json.loads(report.read_text())["levels"]
    assert [(lv["sessions"], lv["ok"], lv["clean"]) for lv in levels] == [(8, 8, True), (32, 32, True)]
    assert all(lv["frames"] >= lv["sessions"] * 5 * 12 for lv in levels)  # ≥ 0.96 × 12.5 frames/s
