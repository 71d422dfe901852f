"""What G tick groups would cost a PersonaPlex pod, from one group's figures per batch size.

Issue 31's trade-off: with G groups a caller's frame waits at most a period / G for its turn, but
every period runs G steps of B / G rows instead of one of B. Each step reads every weight and
launches the bucket's ops; the KV read is per row, so it does not grow. Pure: it takes the rows
`bench engine` measured or counted and derives, per batch B and G dividing it (B / G measured too),
what a period would cost against one group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from liveplex.live import frames, groups

Row = Mapping[str, Any]
"""A row of `bench engine`'s report (JSON values)."""

GROUPS = (1, 2, 4)


def _split(batch: int, groups: int, known: Mapping[int, Row]) -> Row | None:
    """The figures of one group's step when B splits evenly into G groups, if that batch was run."""
    if batch % groups:
        return None
    return known.get(batch // groups)


def timed(rows: Sequence[Row]) -> list[dict[str, float]]:
    """From `bench engine`'s timed rows (batch, tick_p50_ms): each period's compute with G groups."""
    known = {int(r["batch"]): r for r in rows}
    out = []
    for batch, row in known.items():
        for g in GROUPS:
            part = _split(batch, g, known)
            if part is None:
                continue
            period = g * float(part["tick_p50_ms"])
            out.append({"batch": batch, "groups": g, "period_ms": period,
                        "x_one_group": period / float(row["tick_p50_ms"])})
    return out


def counted(levels: Sequence[Row], weight_bytes: int) -> list[dict[str, int]]:
    """From `bench engine --count`'s levels at full context: ops, weight and KV bytes per period
    with G groups (each group's batch in its own bucket)."""
    deepest = max(int(r["position"]) for r in levels)
    full = {int(r["batch"]): r for r in levels if int(r["position"]) == deepest}
    out: list[dict[str, int]] = []
    for batch in full:
        for g in GROUPS:
            part = _split(batch, g, full)
            if part is None:
                continue
            out.append({"batch": batch, "groups": g, "ops_per_period": g * int(part["ops"]),
                        "weight_bytes_per_period": g * weight_bytes,
                        "kv_bytes_per_period": g * int(part["kv_bytes"])})
    return out


def chosen(batch: int, steps_ms: Mapping[int, float], prefill_ms: float) -> dict[str, object]:
    """The G the engine's rule (`live.groups.choose`) takes for `batch` sessions, from one step's
    ms measured at each group's rows (`steps_ms`, by rows: the G = 1, 2, 4 steps of B / G rows)
    with `prefill_ms` owed; rows not measured weigh as the next measured above (the engine's
    bucket)."""
    def step_s(groups_: int, rows: int) -> float:
        return steps_ms[min(r for r in steps_ms if r >= rows)] / 1e3

    choice = groups.choose(step_s, batch, prefill_ms / 1e3, frames.PERIOD_NS / 1e9)
    return {"batch": batch, "groups": choice.groups, "reason": choice.reason,
            "busy_ms": round(choice.busy_s * 1e3, 3), "late_ms": round(choice.late_s * 1e3, 3)}
