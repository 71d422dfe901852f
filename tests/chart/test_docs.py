"""The chart's README documents every value with its default; docs/deploy.md shows the exact autoscaling queries."""

from __future__ import annotations

import re
from typing import Any

import yaml

from liveplex.operator import signals
from tests.chart import render
from tests.operator.objects import ROOT

DOC = (ROOT / "docs" / "deploy.md").read_text()
README = (render.CHART / "README.md").read_text()
OPAQUE = ("resources", "scrapers", "ingress.annotations")
"""Values documented as one row (a Kubernetes structure), not per key."""


def _leaves(node: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict) and node and not path.endswith(OPAQUE):
        return [leaf for key, sub in node.items() for leaf in _leaves(sub, f"{path}.{key}" if path else key)]
    return [(path, node)]


def _shown(default: Any) -> str:
    if isinstance(default, bool):
        return str(default).lower()
    return '""' if default == "" else str(default)


def test_every_value_has_a_row_with_its_default() -> None:
    rows = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `([^`]+)` \| ([^|]*) \|", README, re.M)}
    values = yaml.safe_load((render.CHART / "values.yaml").read_text())
    for path, default in _leaves(values):
        assert path in rows, f"charts/liveplex/README.md has no row for {path}"
        if isinstance(default, (bool, int, str)) or default in ([], {}):
            assert rows[path] == f"`{_shown(default)}`", (path, rows[path])


def test_the_autoscaling_queries_are_shown_exactly() -> None:
    t = signals.Target("voice", "pp")
    for query in (signals.occupied_query(t), signals.demand_query(t), signals.lateness_p99_query(t),
                  signals.late_tick_ratio_query(t)):
        assert query in DOC, query
