"""Leader election over a `coordination.k8s.io/v1` Lease, client-go's way, so replicas of the
operator can run side by side with one reconciling.

kopf's own peering pauses every operator of equal priority, so it needs distinct priorities per
replica; a Lease is what Kubernetes controllers use and what a Deployment's identical replicas can
share. A replica takes the Lease when it is free, released, or its holder has not renewed it for
`leaseDurationSeconds` as observed on this replica's own clock (never by comparing clocks). The
holder renews every `renew_s`; a holder that could not renew for `deadline_s` has lost it and stops
(the process exits and restarts as a standby). Writes carry the resourceVersion read, so of two
replicas racing for a free Lease one wins and the other gets a conflict.

`step` is the decision as a plain function; `Elector` is the shell that reads and writes the Lease.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from liveplex.operator import apply

logger = logging.getLogger(__name__)

API_VERSION, KIND = "coordination.k8s.io/v1", "Lease"
DEFAULT_DURATION_S = 15


def identity() -> str:
    """Unique per process: the pod's hostname (its name) and a random suffix, as client-go does."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time(at: datetime) -> str:
    """Kubernetes' MicroTime."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Observed:
    """The Lease's spec as last read, and when (this replica's monotonic clock) it last changed."""

    spec: Mapping[str, Any]
    since: float


def step(spec: Mapping[str, Any] | None, observed: Observed | None, me: str, duration_s: int, now: float,
         wall: datetime) -> tuple[Observed | None, dict[str, Any] | None]:
    """The new observation, and the spec to write to take or renew the Lease (None: someone else
    holds it). `spec` None: no Lease yet."""
    if spec is not None and (observed is None or observed.spec != spec):
        observed = Observed(dict(spec), now)
    current = dict(spec or {})
    holder = current.get("holderIdentity") or ""
    held_for = int(current.get("leaseDurationSeconds") or duration_s)
    if holder not in ("", me) and observed is not None and now - observed.since < held_for:
        return observed, None
    stamp = micro_time(wall)
    taken = holder != me
    return observed, {
        "holderIdentity": me,
        "leaseDurationSeconds": duration_s,
        "acquireTime": stamp if taken else current.get("acquireTime", stamp),
        "renewTime": stamp,
        "leaseTransitions": int(current.get("leaseTransitions") or 0) + (1 if taken and holder else 0),
    }


class Elector:
    """Takes, holds and releases one Lease through the operator's Kubernetes client."""

    def __init__(self, client: apply.KubeClient, namespace: str, name: str, me: str,
                 duration_s: int = DEFAULT_DURATION_S, clock: Callable[[], float] = time.monotonic) -> None:
        if duration_s < 1:
            raise ValueError(f"--leader-lease-s must be >= 1, got {duration_s}")
        self._client = client
        self.ref = apply.Ref(API_VERSION, KIND, namespace, name)
        self.me = me
        self.duration_s = duration_s
        self.renew_s = duration_s / 5
        self.deadline_s = duration_s * 2 / 3
        self._clock = clock
        self._observed: Observed | None = None

    async def try_once(self) -> bool:
        """One read and at most one write; True when this replica holds the Lease now."""
        current = await self._client.get(self.ref)
        spec = None if current is None else current.get("spec") or {}
        self._observed, wanted = step(spec, self._observed, self.me, self.duration_s, self._clock(),
                                      datetime.now(UTC))
        if wanted is None:
            return False
        try:
            if current is None:
                await self._client.create({"apiVersion": API_VERSION, "kind": KIND, "spec": wanted,
                                           "metadata": {"namespace": self.ref.namespace, "name": self.ref.name}})
            else:
                await self._client.patch(self.ref, {"metadata": {"resourceVersion":
                                                                 current["metadata"]["resourceVersion"]},
                                                    "spec": wanted})
        except apply.KubeError as exc:  # 409: another replica wrote first; the next try reads it
            if exc.status != 409:
                raise
            return False
        return True

    async def acquire(self) -> None:
        """Return once this replica holds the Lease; API errors are logged and retried."""
        logger.info("waiting for the leader Lease", extra={"lease": f"{self.ref.namespace}/{self.ref.name}",
                                                           "identity": self.me})
        while True:
            try:
                if await self.try_once():
                    logger.info("leading", extra={"identity": self.me})
                    return
            except apply.KubeError:
                logger.warning("leader Lease not read or written", exc_info=True)
            await asyncio.sleep(self.renew_s)

    async def hold(self) -> None:
        """Renew until a renewal has not succeeded for `deadline_s`; returns then (leadership lost)."""
        renewed = self._clock()
        while self._clock() - renewed < self.deadline_s:
            await asyncio.sleep(self.renew_s)
            try:
                if await self.try_once():
                    renewed = self._clock()
            except apply.KubeError:
                logger.warning("leader Lease not renewed", exc_info=True)
        logger.error("leader Lease lost", extra={"identity": self.me, "deadline_s": self.deadline_s})

    async def release(self) -> None:
        """Hand the Lease over at once on a clean stop (a standby takes it within `renew_s`)."""
        try:
            current = await self._client.get(self.ref)
            if current is not None and (current.get("spec") or {}).get("holderIdentity") == self.me:
                await self._client.patch(self.ref, {"metadata": {"resourceVersion":
                                                                 current["metadata"]["resourceVersion"]},
                                                    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}})
                logger.info("leader Lease released", extra={"identity": self.me})
        except apply.KubeError:
            logger.warning("leader Lease not released; a standby takes it when it expires", exc_info=True)
