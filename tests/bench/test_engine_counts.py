"""Exact tick counts (issue 14): kernels, host syncs and attention's KV reads, without a GPU.

The real PersonaPlex-7B shapes run on the meta device (no memory, about a second per tick); the
KV bytes need the lengths' values, so they are checked on the CPU at the `small` config, where the
`flash` path runs through the counter's reference kernel. Speed is never asserted: these are counts.
"""

from __future__ import annotations

import pytest
import torch

from liveplex.bench import engine_counts
from liveplex.personaplex import ring

OPS_PER_TICK = 1300
"""The ceiling a served tick stays under at the real shapes (1286 now, from 5299 and then 1614;
issue 14 aims at 1200, which needs fused kernels: docs/bench.md, "Engine counts")."""
OPS_PER_PREFILL = 560
"""One newcomer's prefill at the real shapes (545 now)."""


@pytest.fixture(scope="module")
def real():
    return engine_counts.build("personaplex-7b", "meta", torch.bfloat16)


@pytest.fixture(scope="module")
def small():
    return engine_counts.build("small", "cpu", torch.float32)


def test_a_served_tick_at_the_real_shapes_launches_the_same_kernels_at_every_bucket_and_never_syncs(real):
    ticks = [engine_counts.tick(real, [100] * b, ring.Backend.FLASH) for b in (1, 8, 64)]
    assert len({t["ops"] for t in ticks}) == 1 and ticks[0]["ops"] <= OPS_PER_TICK
    assert all(t["syncs"] == [] for t in ticks)


def test_a_newcomers_prefill_at_the_real_shapes_never_syncs(real):
    got = engine_counts.newcomer(real, ring.Backend.FLASH)
    assert got["syncs"] == [] and got["ops"] <= OPS_PER_PREFILL and got["rows"] == 39


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
