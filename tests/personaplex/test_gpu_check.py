"""`scripts/gpu_check.py` stays runnable: its CPU smoke run (`--config tiny --device cpu`) completes
every stage of the engine's real tick (`engine_pod.program`, eager on CPU) and writes a complete
report (spec personaplex §6.12)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cpu_smoke_run_writes_every_stage(tmp_path):
    module = _script()
    out = tmp_path / "check.json"
    assert module.main(["--config", "tiny", "--device", "cpu", "--batch", "1,2", "--ticks", "3", "--warmup", "1",
                        "--kv-leg", "2", "--group-batch", "4,6", "--out", str(out)]) == 0
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
    groups = {(g["batch"], g["groups"]): g for g in report["tick_groups"]}  # issue 31: from the full-context rows
    assert set(groups) == {(1, 1), (2, 1), (2, 2)}
    assert groups[(2, 2)]["period_ms"] == 2 * levels[1]["p50_ms"]
    run = report["groups_run"]  # issue 44: G = 1, 2, 4 run as the engine runs them, and the G its rule takes
    assert [(r["batch"], r["groups"], r["rows"]) for r in run["levels"]] == [(4, 1, 4), (4, 2, 2), (4, 4, 1),
                                                                              (6, 1, 6), (6, 2, 3)]
    for r in run["levels"]:
        assert r["finite"] and r["period_p50_ms"] == r["wall"]["p50_ms"] == r["groups"] * r["step_p50_ms"] > 0
        assert r["graph_device_bytes_per_group"] is None  # no graphs on the CPU
    assert [c["batch"] for c in run["chosen"]] == [4, 6] and run["prefill_owed_ms"] == report["prefill_one_newcomer_ms"]
    assert all(c["groups"] in (1, 2, 4) and "fits" in c["reason"] for c in run["chosen"])


def test_a_level_above_26_sessions_is_admitted_in_one_prefill():
    """Stage 6 admits a whole level at once: the prompt staging buffer holds every slot's prompt
    (it held 26, so the default level of 64 failed before a tick ran)."""
    module = _script()
    lm = module.checkpoint.random_lm(module.config.CONFIGS["tiny"](), seed=0)
    codec = module.mimi.random_mimi(module.mimi.tiny_config(), seed=0)
    bench = module._Bench(lm, codec, 30, False, module.ring.Backend.MASKED, module.torch.device("cpu"))
    assert bench.admit(list(range(30))) > 0


def test_the_kv_leg_measures_both_rings_and_the_8_bit_stages_run(tmp_path):
    """Issue 36's leg on the CPU: both rings' bytes and levels (no sessions admitted off CUDA), a
    verdict; and stages 2-9 on the 8-bit ring alone (`--kv-dtype fp8`)."""
    module = _script()
    out = tmp_path / "check.json"
    assert module.main(["--config", "tiny", "--device", "cpu", "--batch", "2", "--ticks", "2", "--warmup", "1",
                        "--kv-dtype", "fp8", "--kv-leg", "1,3", "--group-batch", "", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["kv_dtype"] == "torch.float8_e4m3fn" and report["replay_vs_eager"]["tokens_identical"]
    assert all("error" not in row and row["finite"] for row in report["levels"])
    full, eight = report["kv_leg"]["rings"]
    assert (full["kv_dtype"], eight["kv_dtype"]) == ("fp32", "fp8")
    assert full["kv_bytes_per_slot"] == 4 * eight["kv_bytes_per_slot"] == report["kv_bytes_per_slot"] * 4
    for ring_ in (full, eight):
        assert ring_["sessions_admitted"] is None and [r["batch"] for r in ring_["levels"]] == [1, 3]
        assert all(r["finite"] and r["full_context"] for r in ring_["levels"])
    assert set(report["kv_leg"]["verdict"]) == {"fp8_sessions_ratio", "fp8_ready", "reasons", "tier_b"}
    assert report["kv_leg"]["verdict"]["tier_b"]["p99_ms"] is None  # batch 128 was not asked for
    assert "groups_run" not in report and report["slots"] == 2  # stage 6b skipped: '' asks for no batch


def _ring(name, admitted, p99, finite=True):
    return {"kv_dtype": name, "sessions_admitted": admitted,
            "levels": [{"batch": 64, "finite": finite, "wall": {"p99_ms": p99}, "device": {"p99_ms": p99}},
                       {"batch": 128, "skipped": "above the sessions admitted"}]}


def test_the_kv_verdict_asks_for_the_sessions_the_tick_and_finite_values():
    verdict = _script().kv_verdict
    got = verdict([_ring("bf16", 78, 40.0), _ring("fp8", 152, 45.0)])
    assert (got["fp8_sessions_ratio"], got["fp8_ready"], got["reasons"]) == (152 / 78, True, [])
    assert got["tier_b"] == {"batch": 128, "p99_ms": None, "target_p99_ms": 40.0, "met": None}  # 128 skipped
    got = verdict([_ring("bf16", 78, 40.0), _ring("fp8", 120, 95.0, finite=False)])
    assert not got["fp8_ready"] and len(got["reasons"]) == 3  # too few sessions, over the tick, not finite
    at_128 = _ring("fp8", 152, 38.0)
    at_128["levels"][1] = {"batch": 128, "finite": True, "wall": {"p99_ms": 41.0}, "device": {"p99_ms": 39.0}}
    assert verdict([_ring("bf16", 78, 40.0), at_128])["tier_b"]["met"]  # the device p99 when there is one
