"""pod-deletion-cost marks only the few emptiest pods (negative, in session order), unmarks the rest,
most urgent first, under an operator-wide budget."""

from __future__ import annotations

import pytest

from liveplex.operator import deletion_costs, names
from liveplex.operator.deletion_cost import OFFSET, Budget
from tests.operator.objects import pod


def cost(active: int) -> str:
    return str(active - OFFSET)


def test_the_emptiest_pods_are_marked_in_session_order_and_nothing_else() -> None:
    pods = [pod(f"p{i}") for i in range(20)]
    emptiest = {"p3": 2, "p1": 0, "p7": 1, "p9": 5}
    assert deletion_costs(pods, emptiest, candidates=3) == [("p1", cost(0)), ("p7", cost(1)), ("p3", cost(2))]
    assert int(cost(5)) < 0, "a marked pod always goes before an unmarked one (cost 0)"


def test_only_changes_are_returned_and_a_pod_that_stopped_being_a_candidate_is_unmarked_first() -> None:
    pods = [pod("a", annotations={names.DELETION_COST: cost(0)}), pod("b", annotations={names.DELETION_COST: cost(1)}),
            pod("c", annotations={names.DELETION_COST: "7"}), pod("d")]
    assert deletion_costs(pods, {"a": 0, "b": 1}, candidates=2) == [("c", None)], "an old-style cost goes too"
    assert deletion_costs(pods, {"a": 0, "d": 0}, candidates=2) == [("b", None), ("c", None), ("d", cost(0))]


def test_terminating_pods_unknown_pods_and_a_single_pod_are_left_alone() -> None:
    pods = [pod("a", deleting=True, annotations={names.DELETION_COST: "3"}), pod("b")]
    assert deletion_costs(pods, {"a": 0, "b": 0, "gone": 0}) == [], "one live pod: a scale-down has no choice"
    assert deletion_costs(pods + [pod("c")], {"a": 0, "b": 4, "gone": 0}) == [("b", cost(4))]


def test_the_budget_refills_at_its_rate_up_to_its_burst() -> None:
    budget = Budget(rate_per_s=10, burst=20)
    assert budget.take(100.0, 50) == 20
    assert budget.take(100.0, 5) == 0
    assert budget.take(100.5, 50) == 5
    assert budget.take(200.0, 3) == 3 and budget.tokens == 17, "refilled to the burst, not beyond"
    with pytest.raises(ValueError, match="rate_per_s"):
        Budget(rate_per_s=0, burst=1)
