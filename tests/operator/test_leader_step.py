"""`leader.step`, the Lease decision, driven directly: take a free or expired Lease, renew one's
own, wait while another holder renews, count transitions; and `Elector` over the in-memory client."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from liveplex.operator import leader
from liveplex.operator.apply import Ref
from tests.operator.fake import FakeKubeClient

WALL = datetime(2026, 1, 1, tzinfo=UTC)
THEIRS = {"holderIdentity": "b", "leaseDurationSeconds": 10, "renewTime": "t0", "leaseTransitions": 3,
          "acquireTime": "t0"}


def test_no_lease_is_taken() -> None:
    observed, spec = leader.step(None, None, "a", 15, 0.0, WALL)
    assert observed is None and spec is not None
    assert spec == {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": "2026-01-01T00:00:00.000000Z",
                    "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0}


def test_another_holders_lease_is_waited_for_its_duration_on_our_clock() -> None:
    observed, spec = leader.step(THEIRS, None, "a", 15, 100.0, WALL)
    assert spec is None and observed == leader.Observed(THEIRS, 100.0)
    observed, spec = leader.step(THEIRS, observed, "a", 15, 109.9, WALL)  # unchanged, within ITS 10 s
    assert spec is None
    renewed = THEIRS | {"renewTime": "t1"}
    observed, spec = leader.step(renewed, observed, "a", 15, 109.95, WALL)  # a renewal restarts the wait
    assert spec is None and observed.since == 109.95
    observed, spec = leader.step(renewed, observed, "a", 15, 120.0, WALL)
    assert spec is not None and spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 4


def test_ones_own_lease_is_renewed_keeping_the_acquire_time() -> None:
    mine = THEIRS | {"holderIdentity": "a"}
    _, spec = leader.step(mine, None, "a", 15, 0.0, WALL)
    assert spec is not None and spec["acquireTime"] == "t0" and spec["leaseTransitions"] == 3
    assert spec["renewTime"] == "2026-01-01T00:00:00.000000Z"


def test_a_released_lease_is_taken_at_once() -> None:
    _, spec = leader.step(THEIRS | {"holderIdentity": ""}, None, "a", 15, 0.0, WALL)
    assert spec is not None and spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 3


def test_the_elector_takes_renews_and_hands_over() -> None:
    async def run() -> None:
        client = FakeKubeClient()
        now = [0.0]
        a = leader.Elector(client, "ops", "lease", "a", duration_s=5, clock=lambda: now[0])
        b = leader.Elector(client, "ops", "lease", "b", duration_s=5, clock=lambda: now[0])
        assert await a.try_once() and not await b.try_once()
        now[0] = 4.0
        assert await a.try_once() and not await b.try_once()  # renewed: b waits again
        await a.release()
        assert await b.try_once()
        ref = Ref(leader.API_VERSION, leader.KIND, "ops", "lease")
        assert (await client.get(ref))["spec"]["holderIdentity"] == "b"  # type: ignore[index]

    asyncio.run(run())


def test_a_lease_shorter_than_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match="--leader-lease-s"):
        leader.Elector(FakeKubeClient(), "ops", "lease", "a", duration_s=0)
