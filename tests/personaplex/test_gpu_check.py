"""`scripts/gpu_check.py` stays runnable: its CPU smoke run (`--config tiny --device cpu`) completes
every stage of the engine's real tick (`engine_pod.program`, eager on CPU) and writes a complete
report (spec personaplex §6.12)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def test_the_cpu_smoke_run_writes_every_stage(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "check.json"
    assert module.main(["--config", "tiny", "--device", "cpu", "--batch", "1,2", "--ticks", "3", "--warmup", "1",
                        "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["bytes_per_slot"] > report["kv_bytes_per_slot"] + report["mimi_state_bytes_per_slot"] > 0
    assert report["prefill_one_newcomer_ms"] > 0 and report["replay_vs_eager"]["tokens_identical"]
    assert report["attention"] == "masked" and report["capture"] == {"buckets": [2, 1], "graphs": False}
    assert [k["batch"] for k in report["kernels"]] == [1, 2]
    assert report["bandwidth"]["bytes_per_s"] > 0
    assert report["fused"] == {"skipped": "the fused kernels run on CUDA, with Triton"}
    assert report["floor_inputs"]["weights_16_steps"] > report["floor_inputs"]["weights_8_steps"] > 0
    levels = report["levels"]
    assert [(row["batch"], row["full_context"]) for row in levels] == [(1, False), (1, True), (2, False), (2, True)]
    for row in levels:
        assert "error" not in row, row.get("error")
        assert row["finite"] and row["wall"]["p50_ms"] > 0
        assert row["prefill_ms_per_newcomer"] > row["prefill_ms_per_row"] > 0
        assert row["floor_16_steps_ms"] > row["floor_8_steps_ms"] > 0
    assert levels[1]["mean_position"] > levels[0]["mean_position"]  # full context: the whole ring is valid
