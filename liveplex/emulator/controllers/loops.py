"""The asyncio shell that runs the pure controllers (workloads, EndpointSlices, ServiceAccounts, GC) on the store.

Development emulator, not for production. Level-based: any change wakes one pass over the
whole store, which plans with the pure modules and applies the writes; the writes wake the next
pass, until nothing changes (writes that change nothing emit no change). A failed write is logged
and retried on the next pass (at the latest after `RESYNC_S`), as a real controller requeues.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict

from liveplex.emulator.apiserver import errors, kinds, storage
from liveplex.emulator.controllers import deployments, endpointslices, gc, serviceaccounts

logger = logging.getLogger(__name__)

DEPLOYMENTS, REPLICASETS = "apps/deployments", "apps/replicasets"
RESYNC_S = 2.0
"""A pass runs at least this often, so a write that failed is retried even when nothing else changes."""


class Controllers:
    def __init__(self, store: storage.Store) -> None:
        self.store = store
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.store.subscribe(self._changed)
        self._wake.set()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.store.unsubscribe(self._changed)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _changed(self, change: storage.Change) -> None:
        if change.key not in ("/events", "events.k8s.io/events", "coordination.k8s.io/leases"):
            self._wake.set()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RESYNC_S):
                    await self._wake.wait()
            self._wake.clear()
            try:
                self.reconcile()
            except Exception:  # a controller bug must not stop every later pass
                logger.exception("controller pass failed; retried on the next change")
            await asyncio.sleep(0)

    def reconcile(self) -> None:
        """One pass: Deployments, ReplicaSets, Services' slices, namespaces' `default` ServiceAccounts, then
        the garbage collector."""
        snapshot = self.store.snapshot()
        for action in self._plan_workloads(snapshot):
            self._apply(action)
        for action in endpointslices.plan(self.store.snapshot()):
            self._apply(action)
        for action in serviceaccounts.plan(self.store.snapshot()):
            self._apply(action)
        for action in gc.plan(self.store.snapshot()):
            self._apply(action)

    def _plan_workloads(self, snapshot: list[tuple[kinds.ResourceType, dict]]) -> list[deployments.Action]:
        pods_by_owner: dict[str, list[dict]] = defaultdict(list)
        sets_by_owner: dict[str, list[dict]] = defaultdict(list)
        deploys, sets = [], []
        for rt, obj in snapshot:
            owners = [r["uid"] for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
            if rt.key == kinds.POD_KEY:
                for uid in owners:
                    pods_by_owner[uid].append(obj)
            elif rt.key == REPLICASETS:
                sets.append(obj)
                for uid in owners:
                    sets_by_owner[uid].append(obj)
            elif rt.key == DEPLOYMENTS:
                deploys.append(obj)
        now = storage.stamp(self.store.now())
        actions: list[deployments.Action] = []
        for deploy in deploys:
            owned = sets_by_owner.get(deploy["metadata"]["uid"], [])
            actions += deployments.plan_deployment(deploy, owned, {
                rs["metadata"]["uid"]: pods_by_owner.get(rs["metadata"]["uid"], []) for rs in owned}, now)
        for rs in sets:
            if not rs["metadata"].get("deletionTimestamp"):
                actions += deployments.plan_replicaset(rs, pods_by_owner.get(rs["metadata"]["uid"], []))
        return actions

    def _apply(self, action: deployments.Action | endpointslices.Action | serviceaccounts.CreateDefault | gc.Action
               ) -> None:
        store, registry = self.store, self.store.registry
        try:
            match action:
                case deployments.Create(kind="Pod"):
                    store.create(registry.by_key(kinds.POD_KEY), action.namespace, action.body)
                case deployments.Create():
                    store.create(registry.by_key(REPLICASETS), action.namespace, action.body)
                case deployments.Scale():
                    store.patch(registry.by_key(REPLICASETS), action.namespace, action.name, storage.MERGE,
                                {"spec": {"replicas": action.replicas}})
                case deployments.DeletePod():
                    store.delete(registry.by_key(kinds.POD_KEY), action.namespace, action.name)
                case deployments.Annotate():
                    key = DEPLOYMENTS if action.kind == "Deployment" else REPLICASETS
                    store.patch(registry.by_key(key), action.namespace, action.name, storage.MERGE,
                                {"metadata": {"annotations": action.annotations}})
                case deployments.SetStatus():
                    key = DEPLOYMENTS if action.kind == "Deployment" else REPLICASETS
                    store.update(registry.by_key(key), action.namespace, action.name, {"status": action.status},
                                 "status")
                case serviceaccounts.CreateDefault():
                    store.create(registry.by_key(kinds.SERVICE_ACCOUNT_KEY), action.namespace,
                                 {"metadata": {"name": serviceaccounts.DEFAULT}})
                case endpointslices.Write(name=None):
                    store.create(registry.by_key(endpointslices.KEY), action.namespace, action.body)
                case endpointslices.Write(name=str() as name):
                    store.update(registry.by_key(endpointslices.KEY), action.namespace, name, action.body)
                case endpointslices.Remove():
                    store.delete(registry.by_key(endpointslices.KEY), action.namespace, action.name)
                case gc.Delete():
                    store.delete(action.rt, action.namespace, action.name,
                                 storage.DeleteOptions(propagation=action.propagation))
                case gc.DropOwners():
                    obj = store.get(action.rt, action.namespace, action.name)
                    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") not in action.uids]
                    store.patch(action.rt, action.namespace, action.name, storage.MERGE,
                                {"metadata": {"ownerReferences": refs or None}})
                case gc.DropFinalizer():
                    obj = store.get(action.rt, action.namespace, action.name)
                    left = [f for f in obj["metadata"].get("finalizers") or [] if f != action.finalizer]
                    store.patch(action.rt, action.namespace, action.name, storage.MERGE,
                                {"metadata": {"finalizers": left or None}})
                case gc.FinalizeNamespace():
                    store.finalize_namespace(action.name)
        except errors.ApiError as exc:
            logger.info("controller write failed, retried on the next pass: %s", exc)
