"""`apply.KubeClient` over the official `kubernetes` client, its blocking calls in worker threads.

Requests go through `DynamicClient.request` by REST path with raw JSON bodies and answers: the
typed APIs would validate bodies against the client's own models (dropping fields a newer server
knows), and discovery is not needed for the few kinds the operator touches, so none is done.
Patches always name their content type: the client would otherwise send a dict to a built-in API
as a strategic merge patch (platform §4 rule 5).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import kubernetes
import kubernetes.dynamic.exceptions
import urllib3

from liveplex.operator import names
from liveplex.operator.apply import Conflict, KubeError, Obj, Ref

MERGE_PATCH = "application/merge-patch+json"

PLURALS: dict[tuple[str, str], str] = {
    ("apps/v1", "Deployment"): "deployments",
    ("v1", "Service"): "services",
    ("v1", "Pod"): "pods",
    ("policy/v1", "PodDisruptionBudget"): "poddisruptionbudgets",
    names.HPA: "horizontalpodautoscalers",
    names.SCALED_OBJECT: "scaledobjects",
    (names.API_VERSION, names.KIND): names.PLURAL,
    ("coordination.k8s.io/v1", "Lease"): "leases",
}
"""Every kind the operator reads or writes, all namespaced."""


def path(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    """The REST path of a collection (no name) or an object; no namespace: across all namespaces."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scoped = f"{root}/namespaces/{namespace}" if namespace is not None else root
    collection = f"{scoped}/{PLURALS[(api_version, kind)]}"
    return f"{collection}/{name}" if name is not None else collection


def load_config() -> kubernetes.client.ApiClient:
    """In a pod, the service account; elsewhere the kubeconfig (`KUBECONFIG` or ~/.kube/config)."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    return kubernetes.client.ApiClient()


def _no_discovery(client: Any, cache_file: Any) -> None:
    """DynamicClient's discoverer slot: requests here are by path, so nothing is discovered."""
    return None


class OfficialClient:
    """The operator's client; one `ApiClient` (connection pool) shared by every call."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self._dynamic = kubernetes.dynamic.DynamicClient(api, discoverer=_no_discovery)

    async def get(self, ref: Ref) -> Obj | None:
        try:
            return await self._request("GET", path(ref.api_version, ref.kind, ref.namespace, ref.name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        where = path(obj["apiVersion"], obj["kind"], obj["metadata"]["namespace"])
        return await self._request("POST", where, body=dict(obj))

    async def patch(self, ref: Ref, patch: Mapping[str, Any]) -> Obj:
        where = path(ref.api_version, ref.kind, ref.namespace, ref.name)
        return await self._request("PATCH", where, body=dict(patch), content_type=MERGE_PATCH)

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: Mapping[str, str] | None = None) -> list[Obj]:
        query = {"label_selector": ",".join(f"{k}={v}" for k, v in selector.items())} if selector else {}
        answer = await self._request("GET", path(api_version, kind, namespace), **query)
        return list(answer.get("items", ()))

    async def delete(self, ref: Ref) -> None:
        try:
            await self._request("DELETE", path(ref.api_version, ref.kind, ref.namespace, ref.name))
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def _request(self, method: str, where: str, **params: Any) -> Obj:
        return await asyncio.to_thread(self._blocking, method, where, params)

    def _blocking(self, method: str, where: str, params: dict[str, Any]) -> Obj:
        try:
            response = self._dynamic.request(method, where, serialize=False, **params)
        except kubernetes.dynamic.exceptions.DynamicApiError as exc:
            status = int(exc.status or 0)
            raise (Conflict if status == 409 else KubeError)(status, _message(exc)) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # no answer: refused, reset, timed out
            raise KubeError(0, str(exc)) from exc
        return json.loads(response.data)


def _message(exc: kubernetes.dynamic.exceptions.DynamicApiError) -> str:
    """The server's own words (its `Status` message, which names the fields), else the HTTP reason."""
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.reason)
