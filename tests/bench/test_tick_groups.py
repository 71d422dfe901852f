"""What G tick groups would cost (issue 31): a period is G steps of B / G rows, from one group's figures."""

from __future__ import annotations

from liveplex.bench import tick_groups


def test_a_period_with_g_groups_is_g_ticks_of_b_over_g_rows():
    rows = [{"batch": 4, "tick_p50_ms": 10.0}, {"batch": 8, "tick_p50_ms": 12.0}, {"batch": 16, "tick_p50_ms": 15.0},
            {"batch": 3, "tick_p50_ms": 9.0}]
    got = {(g["batch"], g["groups"]): (g["period_ms"], g["x_one_group"]) for g in tick_groups.timed(rows)}
    assert got[(16, 4)] == (40.0, 40.0 / 15.0)  # four steps of 4 rows
    assert got[(16, 2)] == (24.0, 24.0 / 15.0)
    assert got[(8, 2)] == (20.0, 20.0 / 12.0)
    assert got[(8, 1)] == (12.0, 1.0)
    assert (8, 4) not in got and (3, 2) not in got  # batch 2 was not run; 3 does not split in two


def test_counted_groups_read_the_weights_once_per_group_and_the_kv_once():
    levels = [{"batch": b, "position": p, "ops": 1000, "kv_bytes": b * (p + 1)} for b in (2, 4) for p in (5, 40)]
    got = {(g["batch"], g["groups"]): g for g in tick_groups.counted(levels, weight_bytes=7)}
    assert got[(4, 2)] == {"batch": 4, "groups": 2, "ops_per_period": 2000, "weight_bytes_per_period": 14,
                           "kv_bytes_per_period": 4 * 41}  # full context: position 40
    assert got[(4, 1)]["kv_bytes_per_period"] == got[(4, 2)]["kv_bytes_per_period"]
    assert set(got) == {(2, 1), (4, 1), (4, 2)}


def test_the_chosen_g_per_batch_is_the_engines_rule_over_the_measured_steps():
    """gpu_check's stage (issue 44): steps of 64, 32 and 16 rows measured; the rule takes 4 groups
    while four steps fit with every turn on time, then 2, then 1, and the owed prefill counts."""
    steps = {16: 15.0, 32: 22.0, 64: 35.0}
    assert tick_groups.chosen(64, steps, 0.0)["groups"] == 4  # 4 x 15 ms, turns 20 ms apart
    assert tick_groups.chosen(64, {16: 24.0, 32: 30.0, 64: 35.0}, 0.0)["groups"] == 2  # 24 > 20: turns late
    slow = tick_groups.chosen(64, {16: 24.0, 32: 45.0, 64: 60.0}, 0.0)
    assert slow["groups"] == 1 and slow["busy_ms"] == 60.0 and "not 2 x 45.0 ms" in str(slow["reason"])
    assert tick_groups.chosen(64, steps, 10.0)["groups"] == 2  # with 4, the last turn and its prefill end at 85 ms
    assert tick_groups.chosen(8, {8: 5.0}, 0.0)["groups"] == 4  # 2 rows weigh as the 8 measured
