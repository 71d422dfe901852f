"""Pure parts of the engine pod: leases, buckets, prefill grouping, the session cap, settings."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex import engine_pod
from liveplex.engine_pod import buckets, engine, grouping, leases, memory, program
from liveplex.personaplex import prompt


@given(st.integers(1, 12), st.lists(st.tuples(st.booleans(), st.integers(0, 11)), max_size=60))
def test_leases_stay_compact_and_moves_keep_every_session(capacity, ops):
    lease = leases.Leases(capacity)
    slots: list[int] = []  # session id per slot, as the engine keeps it
    next_id = 0
    for acquire, pick in ops:
        if acquire and lease.live < capacity:
            assert lease.acquire() == len(slots)
            slots.append(next_id)
            next_id += 1
        elif slots:
            slot = pick % len(slots)
            ended = slots[slot]
            move = lease.release(slot)
            last = slots.pop()
            if move is None:
                assert slot == len(slots) and last == ended
            else:
                assert (move.src, move.dst) == (len(slots), slot)
                slots[move.dst] = last
            assert ended not in slots
        assert lease.live == len(slots) and len(set(slots)) == len(slots)


def test_a_full_pool_refuses_and_a_free_slot_must_be_leased():
    lease = leases.Leases(1)
    assert lease.acquire() == 0
    with pytest.raises(leases.LeaseError, match="all 1 slots"):
        lease.acquire()
    assert lease.release(0) is None
    with pytest.raises(leases.LeaseError, match="not leased"):
        lease.release(0)


COST = grouping.PrefillCost(per_call=0.004, per_newcomer=0.001, per_row=0.0001)
"""4 ms per call, 1 ms per newcomer, 0.1 ms per row."""
costs = st.builds(grouping.PrefillCost, st.floats(0, 0.01), st.floats(0, 0.01), st.floats(1e-6, 1e-3))


@given(st.lists(st.integers(1, 3000), max_size=12), st.floats(0, 0.1), costs, st.integers(16, 4096))
def test_a_tick_prefills_an_arrival_order_prefix_within_its_budget_splitting_only_the_last(
        rows, budget, cost, max_rows):
    taken = grouping.chunks(rows, budget, cost, max_rows)
    assert len(taken) <= len(rows)
    if not rows:
        assert taken == []
        return
    assert taken[0] >= min(rows[0], grouping.MIN_CHUNK_ROWS)  # the head always progresses
    assert taken[:-1] == rows[:len(taken) - 1]  # whole newcomers, in order, then maybe part of one
    assert 0 < taken[-1] <= rows[len(taken) - 1]
    if len(taken) > 1 or taken[0] > grouping.MIN_CHUNK_ROWS:
        assert cost.of(taken) <= budget + 1e-12 and sum(taken) <= max_rows


@pytest.mark.parametrize(("rows", "budget_ms", "taken"), [
    ([10, 20], 40, [10, 20]),  # 4 + 2 + 3 ms: both whole
    ([200, 100], 40, [200, 100]),  # 4 + 2 + 30 = 36 ms
    ([200, 150], 40, [200, 140]),  # the second is split: 4 + 2 + 34 ms
    ([400, 10], 40, [350]),  # 4 + 1 + 35 ms: the head alone, split
    ([400], 2, [16]),  # nothing fits: the head still gets its minimum chunk
    ([5, 400, 1], 40, [5, 335]),  # strict order: the 1 never overtakes the 400
    ([], 40, []),
])
def test_prefill_chunk_examples(rows: list[int], budget_ms: float, taken: list[int]) -> None:
    assert grouping.chunks(rows, budget_ms / 1e3, COST, 4096) == taken


@given(st.lists(st.integers(1, 3000), min_size=1, max_size=12), st.floats(0, 0.1), costs)
def test_every_newcomer_starts_within_a_bound_of_ticks_set_by_the_rows_ahead_of_it(rows, budget, cost):
    """However small the budget, the head of the queue gets `MIN_CHUNK_ROWS` (or what it has left)
    every tick, so newcomer i starts within sum over j <= i of ceil(rows[j] / MIN_CHUNK_ROWS) ticks."""
    queue, tick, started = list(rows), 0, []
    while queue:
        tick += 1
        taken = grouping.chunks(queue, budget, cost, 4096)
        for i, n in enumerate(taken):
            queue[i] -= n
        while queue and queue[0] == 0:
            queue.pop(0)
            started.append(tick)
    for i, at in enumerate(started):
        assert at <= sum(-(-r // grouping.MIN_CHUNK_ROWS) for r in rows[:i + 1])


def test_the_cost_fit_recovers_its_terms_and_the_budget_is_what_the_tick_leaves():
    one, double, pair = [COST.of([32])], [COST.of([64])], [COST.of([32, 32])]
    fit = grouping.PrefillCost.fit(32, one, double, pair)
    assert fit.per_call == pytest.approx(COST.per_call) and fit.per_newcomer == pytest.approx(COST.per_newcomer)
    assert fit.per_row == pytest.approx(COST.per_row)
    assert grouping.budget_s(0.08, 0.03) == pytest.approx(0.03)
    assert grouping.budget_s(0.08, 0.07) == pytest.approx(0.08 * grouping.FLOOR)  # never under the floor


def test_a_fit_noise_swamped_charges_the_rows_not_nothing():
    """A loaded CPU timed 64 rows faster than 32: the rows are not free (which plans 1,024 a tick)."""
    fit = grouping.PrefillCost.fit(32, [0.004], [0.0039], [0.005])
    assert fit.per_row == pytest.approx(0.004 / 32)
    assert grouping.chunks([3000], 0.008, fit, 1024) == [55]  # (8 ms less 1.1 ms per newcomer) / 0.125 ms


SLOW_TICKS = {1: 0.036, 2: 0.053, 4: 0.047, 8: 0.061, 12: 0.075, 16: 0.089}
"""Seconds by bucket: the tiny model's tick at 16 slots on the loaded 2-core box where `liveplex
check`'s voices and instructions-limit checks timed out (the full pod's tick fills the period)."""
SLOW_COST = grouping.PrefillCost(per_call=0.00115, per_newcomer=0.00019, per_row=0.000075)
"""Its prefill cost, fitted at the same startup."""


def test_the_longest_role_prompt_starts_within_seconds_on_a_pod_whose_full_tick_fills_the_period():
    """The instructions-limit check's prompt (the whole window) beside one running session, on the
    slow box: at `MIN_CHUNK_ROWS` a tick it took 188 ticks (15 s, past the check's 12 s)."""
    left, ticks = [2998], 0
    budget = grouping.budget_s(0.08, SLOW_TICKS[2])  # two sessions: what the bucket-2 step leaves
    while left:
        left = [n - taken for n, taken in zip(left, grouping.chunks(left, budget, SLOW_COST, 1024)) if n > taken]
        ticks += 1
    assert ticks * 0.08 < 3.0


@given(st.integers(16, 6000), st.floats(0, 0.1), costs, st.integers(16, 4096))
def test_a_whole_window_heading_the_queue_is_prefilled_within_start_ticks_whatever_the_budget(
        context, budget, cost, max_rows):
    """The head's least chunk is a window's share: however loaded the device (a budget of 0), the
    longest prompt starts within `START_TICKS` ticks of heading the queue (unless `max_rows` caps it)."""
    least = grouping.head_rows(context)
    assert least >= grouping.MIN_CHUNK_ROWS
    left, ticks = context, 0
    while left:
        left -= grouping.chunks([left], budget, cost, max_rows, least)[0]
        ticks += 1
    assert ticks <= max(grouping.START_TICKS, -(-context // max_rows))


@given(st.lists(st.integers(1, 200), min_size=1, max_size=12), st.integers(1, 200), st.integers(1, 200))
def test_bucket_is_the_smallest_that_holds_the_batch(base, max_sessions, sessions):
    cut = buckets.cut(base, max_sessions)
    assert cut[-1] == max_sessions and list(cut) == sorted(set(cut))
    if sessions > max_sessions:
        with pytest.raises(ValueError):
            buckets.bucket_for(sessions, cut)
        return
    b = buckets.bucket_for(sessions, cut)
    assert b >= sessions and all(c < sessions for c in cut if c < b)


def test_spec_example_h200_fits_78_sessions():
    per_slot = memory.SlotBytes(kv=memory.kv_bytes(32, 3000, 4096, 2), mimi=16_480_000, tokens=65_536).total
    free = int((139 - 14.3 - 0.3 - 0.4) * memory.GIB)
    assert memory.kv_bytes(32, 3000, 4096, 2) == 1_572_864_000
    assert memory.max_sessions(0, free, 8 * memory.GIB, per_slot) == 78


def test_a_cap_over_memory_and_no_room_at_all_are_errors_naming_the_numbers():
    assert memory.max_sessions(10, 100 * memory.GIB, 8 * memory.GIB, memory.GIB) == 10
    assert memory.max_sessions(92, 100 * memory.GIB, 8 * memory.GIB, memory.GIB) == 92  # exactly what fits
    assert memory.max_sessions(1, 9 * memory.GIB, 8 * memory.GIB, memory.GIB) == 1
    with pytest.raises(memory.CapacityError, match="--max-sessions 93 does not fit: 92 sessions"):
        memory.max_sessions(93, 100 * memory.GIB, 8 * memory.GIB, memory.GIB)
    with pytest.raises(memory.CapacityError, match="not one session fits"):
        memory.max_sessions(0, 8 * memory.GIB, 8 * memory.GIB, memory.GIB)


def test_a_varying_g_counts_its_spare_slot_and_every_groups_graphs_against_the_cap():
    """Issue 44: `--tick-groups 0` holds S + 1 slots and captures a graph per bucket of every group
    of G = 1, 2, 4. On the spec's H200 the spare slot costs the 78th session; the graphs' outputs
    (one packed row per bucket row, every group) cost none."""
    per_slot = memory.SlotBytes(kv=memory.kv_bytes(32, 3000, 4096, 2), mimi=16_480_000, tokens=65_536).total
    free = int((139 - 14.3 - 0.3 - 0.4) * memory.GIB)
    row = program.PACKED_WIDTH * 4
    settings = engine_pod.EngineSettings(model_dir=None)  # type: ignore[arg-type]
    auto = engine.group_counts(settings)

    def graphs(sessions: int) -> int:
        return memory.graph_bytes(sessions, auto, settings.buckets, row)

    assert (auto, engine.spare_slots(settings)) == ((1, 2, 4), 1)
    assert memory.max_sessions(0, free, 8 * memory.GIB, per_slot, 1, graphs) == 77
    fixed = dataclasses.replace(settings, tick_groups=1)
    assert (engine.group_counts(fixed), engine.spare_slots(fixed)) == ((1,), 0)
    assert memory.max_sessions(0, free, 8 * memory.GIB, per_slot, 0, graphs) == 78
    # 8 slots, buckets 1, 2, 4, 8: G = 1 captures 1+2+4+8, G = 2 twice 1+2+4, G = 4 four times 1+2
    assert memory.graph_bytes(8, (1, 2, 4), (1, 2, 4, 8), row) == (15 + 2 * 7 + 4 * 3) * row
    assert memory.graph_bytes(8, (1,), (1, 2, 4, 8), row) == 15 * row
    with pytest.raises(memory.CapacityError, match="1 spare slot, graphs"):
        memory.max_sessions(0, 9 * memory.GIB, 8 * memory.GIB, memory.GIB, 1, lambda n: n)


@given(st.integers(0, 200), st.integers(1, 50), st.integers(0, 2), st.integers(0, 10))
def test_the_derived_cap_is_the_most_sessions_whose_slots_spare_and_graphs_fit(room, per_slot, spare, per_graph):
    def graphs(sessions: int) -> int:
        return per_graph * sessions

    def cost(sessions: int) -> int:
        return (sessions + spare) * per_slot + graphs(sessions)

    try:
        cap = memory.max_sessions(0, room, 0, per_slot, spare, graphs)
    except memory.CapacityError:
        assert cost(1) > room
        return
    assert cost(cap) <= room < cost(cap + 1)


def test_default_schedule_is_the_model_packages():
    assert engine_pod.EngineSettings(model_dir=None).schedule == prompt.DEFAULT_SCHEDULE.value  # type: ignore[arg-type]
    assert set(engine_pod.settings.SCHEDULES) == {s.value for s in prompt.Schedule}


def test_settings_name_the_bad_flag(tmp_path):
    parser = argparse.ArgumentParser()
    engine_pod.add_arguments(parser)
    parser.add_argument("--max-sessions", type=int)
    parser.add_argument("--max-seconds", type=float, default=240)
    parser.add_argument("--jitter-frames", type=int, default=4)
    parser.add_argument("--prebuffer-frames", type=int, default=2)
    parser.add_argument("--fail-after-ticks", type=int, default=0)
    parser.add_argument("--tick-groups", type=int, default=None)
    parser.add_argument("--voice-dir", default=None)
    with pytest.raises(ValueError, match="needs --model-path"):
        engine_pod.settings_from_args(parser.parse_args([]))
    with pytest.raises(ValueError, match="max_prefill_rows=0"):
        engine_pod.settings_from_args(parser.parse_args(
            ["--model-path", str(tmp_path), "--device", "cpu", "--max-prefill-rows", "0"]))
    ok = engine_pod.settings_from_args(parser.parse_args(["--model-path", str(tmp_path), "--device", "cpu"]))
    assert (ok.dtype, ok.max_sessions, ok.schedule, ok.tick_groups) == ("fp32", 0, "upstream", 0)  # G measured
    with pytest.raises(ValueError, match="tick_groups=5"):  # the sim's 5 and 8 are not PersonaPlex's
        engine_pod.settings_from_args(parser.parse_args(
            ["--model-path", str(tmp_path), "--device", "cpu", "--tick-groups", "5"]))
    assert ok.kv_dtype is None and ok.ring_dtype == "fp32"  # the weights' dtype: bf16 stays the default on a GPU
    with pytest.raises(ValueError, match="--kv-dtype bf16: the KV ring holds the weights' dtype \\(fp32\\) or fp8"):
        engine_pod.settings_from_args(parser.parse_args(
            ["--model-path", str(tmp_path), "--device", "cpu", "--kv-dtype", "bf16"]))
    fp8 = engine_pod.settings_from_args(parser.parse_args(
        ["--model-path", str(tmp_path), "--device", "cpu", "--kv-dtype", "fp8"]))
    assert fp8.kv_dtype == fp8.ring_dtype == "fp8"
    with pytest.raises(ValueError, match="kv_dtype='bf16'"):
        engine_pod.EngineSettings(model_dir=tmp_path, dtype="fp32", kv_dtype="bf16")


def test_the_session_cap_counts_the_rings_own_bytes(tiny_model):
    """Issue 36: an 8-bit ring is one byte per value: the tiny fp32 model's sessions cost a quarter
    of the KV, and at the real shapes (docs/engine_pod.md's H200) half of bf16's."""
    from liveplex.engine_pod import engine

    settings = engine_pod.EngineSettings(model_dir=None, context_frames=40)  # type: ignore[arg-type]
    fp32 = engine.slot_bytes(tiny_model, settings)
    fp8 = engine.slot_bytes(tiny_model, dataclasses.replace(settings, kv_dtype="fp8"))
    assert fp32.kv == memory.kv_bytes(2, 40, 64, 4) == 4 * fp8.kv and fp8.mimi == fp32.mimi > 0
    bf16_7b, fp8_7b = (memory.SlotBytes(memory.kv_bytes(32, 3000, 4096, e), 19_600_000, 65_536).total for e in (2, 1))
    free, reserve = int(123.7 * memory.GIB), 8 * memory.GIB  # an H200 after the weights
    assert (memory.max_sessions(0, free, reserve, bf16_7b), memory.max_sessions(0, free, reserve, fp8_7b)) == (78, 154)
