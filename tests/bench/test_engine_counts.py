"""Exact tick counts (issue 14): kernels, host syncs and attention's KV reads, without a GPU.

The real PersonaPlex-7B shapes run on the meta device (no memory, about a second per tick); the
KV bytes need the lengths' values, so they are checked on the CPU at the `small` config, where the
`flash` path runs through the counter's reference kernel. Speed is never asserted: these are counts.
"""

from __future__ import annotations

import pytest
import torch

from liveplex.bench import engine_counts
from liveplex.personaplex import config, kernels, kv8, ring

OPS_PER_TICK = 1200
"""Issue 14's ceiling for a served tick at the real shapes: 1137 now with the fused kernels (5299,
then 1614, then 1286 with the eager ops alone; docs/bench.md, "Engine counts")."""
OPS_PER_PREFILL = 520
"""One newcomer's prefill at the real shapes (507 now with the fused kernels, 545 without)."""
FFNS = 32 + 6 * 8
"""The gated FFNs of a tick: 32 temporal layers, 6 depformer layers x 8 steps."""
DRAWS = 9
"""A tick's sampled draws: text, then agent cb0..7."""
fused = pytest.mark.skipif(not kernels.TRITON, reason="the fused kernels need Triton (the dev extra installs it)")


@pytest.fixture(scope="module")
def real():
    return engine_counts.build("personaplex-7b", "meta", torch.bfloat16)


@pytest.fixture(scope="module")
def small():
    return engine_counts.build("small", "cpu", torch.float32)


@pytest.fixture(scope="module")
def real_ticks(real):
    return [engine_counts.tick(real, [100] * b, ring.Backend.FLASH) for b in (1, 8, 64)]


def test_a_served_tick_at_the_real_shapes_launches_the_same_kernels_at_every_bucket_and_never_syncs(real_ticks):
    assert len({t["ops"] for t in real_ticks}) == 1
    assert all(t["syncs"] == [] for t in real_ticks)


@fused
def test_with_the_fused_kernels_a_served_tick_stays_under_1200_ops_each_ffn_noise_and_race_one_kernel(real_ticks):
    for t in real_ticks:
        assert t["ops"] <= OPS_PER_TICK
        assert t["by_op"]["liveplex::silu_and_mul"] == FFNS and "silu" not in t["by_op"]
        assert t["by_op"]["liveplex::race_noise"] == 1 and "log" not in t["by_op"]
        assert t["by_op"]["liveplex::race_winner"] == t["by_op"]["topk"] == DRAWS and "argmax" not in t["by_op"]


@fused
def test_an_8_bit_ring_keeps_the_ticks_kernels_and_halves_its_kv_reads(real_ticks):
    """Issue 36: the quantized write and the fp8 attention replace the index copy and flash, one
    kernel each, so the tick launches as many kernels as with bf16 and reads half the KV bytes."""
    fp8 = engine_counts.build("personaplex-7b", "meta", torch.bfloat16, kv8.FP8)
    for bf16, b in zip(real_ticks, (1, 8, 64), strict=True):
        got = engine_counts.tick(fp8, [100] * b, ring.Backend.FLASH)
        assert got["ops"] == bf16["ops"] <= OPS_PER_TICK and got["syncs"] == []
        layers = fp8.cfg.num_layers
        assert got["by_op"]["liveplex::kv8_write"] == got["by_op"]["liveplex::kv8_attend"] == layers
        assert "index_copy_" not in got["by_op"] and "_flash_attention_forward" not in got["by_op"]
        assert 2 * got["kv_bytes"] == bf16["kv_bytes"] and 2 * got["valid_kv_bytes"] == bf16["valid_kv_bytes"]
    newcomer = engine_counts.newcomer(fp8, ring.Backend.FLASH)
    assert newcomer["syncs"] == [] and newcomer["ops"] <= OPS_PER_PREFILL


def test_an_8_bit_ring_holds_a_session_in_half_the_bytes_at_the_real_shapes():
    per_session = engine_counts.kv_bytes_per_session(config.personaplex_7b())
    assert per_session["bf16"] == 1_572_864_000 == 2 * per_session["fp8"]


def test_a_park_moves_every_pool_row_of_one_slot_and_the_pause_multiplies_what_a_gpu_holds(real, small):
    """Issue 43: a park copies one slot's rows of every state pool (counted against the rows of a
    two-slot pool); at the 7B shapes that is the KV ring plus Mimi's ~20 MB, a wake's copy fits
    an 80 ms tick at PCIe 5 rates, and a 512 GiB host holds many times the device's sessions."""
    from liveplex.engine_pod import program
    pools = program.Pools(small.lm, small.codec, 2)
    row = sum(t[0].nbytes for s in (pools.kv, pools.codec, pools.tokens) for t in s.tensors())
    assert engine_counts.park_bytes(small, torch.float32) == row
    rows = engine_counts.parks(real, 512 << 30)
    by = {(r["gpu"], r["ring"]): r for r in rows}
    # the engine's cap with its spare slot (docs/engine_pod.md): one fewer than memory alone holds
    assert [by[g, "bf16"]["slots"] for g in engine_counts.FREE_AFTER_LOAD_GIB] == [36, 77]
    assert [by[g, "fp8"]["slots"] for g in engine_counts.FREE_AFTER_LOAD_GIB] == [73, 153]
    for r in rows:
        kv = engine_counts.kv_bytes_per_session(real.cfg)[r["ring"]]
        assert 0 < r["park_bytes"] - kv < 25e6
        assert r["copy_ms"] < 80 and r["wakes_per_tick"] >= 1
        # the ring's row is one pinned block, rounded up to a power of two: 2 GiB bf16, 1 GiB fp8
        block = 1 << 31 if r["ring"] == "bf16" else 1 << 30
        assert block < r["held_bytes"] < block + 50e6 and r["paused"] == (512 << 30) // r["held_bytes"]
        assert r["held"] == max(r["slots"], r["paused"]) == r["paused"] > 3 * r["slots"]


def test_the_most_sessions_held_is_the_host_budget_or_the_device_whichever_is_more():
    assert engine_counts.most_held(37, 345, 2) == 345
    assert engine_counts.most_held(37, 10, 2) == 37
    assert engine_counts.most_held(4, 0, 2) == 4


@pytest.fixture(scope="module")
def real_newcomer(real):
    return engine_counts.newcomer(real, ring.Backend.FLASH)


def test_a_newcomers_prefill_at_the_real_shapes_never_syncs(real_newcomer):
    assert real_newcomer["syncs"] == [] and real_newcomer["rows"] == 39


@fused
def test_with_the_fused_kernels_a_newcomers_prefill_stays_under_its_ceiling(real_newcomer):
    assert real_newcomer["ops"] <= OPS_PER_PREFILL


def test_flash_attention_reads_each_rows_valid_keys_only_and_masked_reads_the_whole_span(small):
    C = small.cfg.context
    positions = [0, 0, 5, 100, C - 1, 4 * C + 17]  # padding rows, young rows, full, wrapped
    flash = engine_counts.tick(small, positions, ring.Backend.FLASH)
    assert flash["kv_measured"] and flash["kv_bytes"] == flash["valid_kv_bytes"]
    per_key = engine_counts.valid_kv_bytes(small.cfg, torch.float32, [0])
    assert engine_counts.tick(small, [0], ring.Backend.FLASH)["kv_bytes"] == per_key  # a padding row: one key
    masked = engine_counts.tick(small, positions, ring.Backend.MASKED)
    assert masked["kv_bytes"] == len(positions) * C * per_key  # every row reads the span, here the ring
    assert flash["syncs"] == masked["syncs"] == []


def test_a_newcomers_prefill_reads_its_prompts_keys_only(small):
    for backend in ring.Backend:
        got = engine_counts.newcomer(small, backend)
        assert got["syncs"] == [] and got["kv_bytes"] == got["valid_kv_bytes"] > 0


def test_the_engine_syncs_once_per_tick_also_while_it_admits():
    got = engine_counts.engine_syncs()
    assert got["syncs_per_tick"] == 1 and got["syncs_in_an_admitting_tick"] == 1
    assert got["what_syncs"] == ["download into staging (the host waits)"]
