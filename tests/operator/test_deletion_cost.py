"""pod-deletion-cost is each live pod's active sessions, written only when it changed."""

from __future__ import annotations

from liveplex.operator import deletion_costs, names
from tests.operator.objects import pod


def test_costs_are_active_sessions_and_only_changes_are_returned() -> None:
    pods = [pod("a", annotations={names.DELETION_COST: "3"}), pod("b", annotations={names.DELETION_COST: "1"}),
            pod("c")]
    assert deletion_costs(pods, {"a": 3, "b": 5}) == {"b": "5", "c": "0"}


def test_terminating_pods_are_left_alone() -> None:
    assert deletion_costs([pod("a", deleting=True)], {"a": 2}) == {}
