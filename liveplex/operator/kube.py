"""`apply.KubeClient` over the official `kubernetes` client, its blocking calls in worker threads.

Typed API methods address each kind, but answers are read raw (`_preload_content=False`) and
decoded as JSON, so no field is lost to a client model older than the server. Patches always
name their content type: the client would otherwise send a dict to a built-in API as a
strategic merge patch (platform §4 rule 5).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import kubernetes
import urllib3

from liveplex.operator import names
from liveplex.operator.apply import Conflict, KubeError, Obj, Ref

MERGE_PATCH = "application/merge-patch+json"

_BUILTIN: dict[tuple[str, str], tuple[str, str]] = {
    ("apps/v1", "Deployment"): ("AppsV1Api", "deployment"),
    ("v1", "Service"): ("CoreV1Api", "service"),
    ("v1", "Pod"): ("CoreV1Api", "pod"),
    ("policy/v1", "PodDisruptionBudget"): ("PolicyV1Api", "pod_disruption_budget"),
}
"""(apiVersion, kind) -> (typed API class, method suffix) for every built-in kind the operator touches."""
_CUSTOM: dict[tuple[str, str], str] = {(names.API_VERSION, names.KIND): names.PLURAL}


def load_config() -> kubernetes.client.ApiClient:
    """In a pod, the service account; elsewhere the kubeconfig (`KUBECONFIG` or ~/.kube/config)."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    return kubernetes.client.ApiClient()


class OfficialClient:
    """The operator's client; one `ApiClient` (connection pool) shared by every call."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self._api = api

    async def get(self, ref: Ref) -> Obj | None:
        try:
            return await self._call(ref.api_version, ref.kind, "read", ref.namespace, name=ref.name)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def create(self, obj: Mapping[str, Any]) -> Obj:
        return await self._call(obj["apiVersion"], obj["kind"], "create", obj["metadata"].get("namespace"),
                                body=dict(obj))

    async def patch(self, ref: Ref, patch: Mapping[str, Any]) -> Obj:
        return await self._call(ref.api_version, ref.kind, "patch", ref.namespace, name=ref.name,
                                body=dict(patch), _content_type=MERGE_PATCH)

    async def list(self, api_version: str, kind: str, namespace: str | None,
                   selector: Mapping[str, str] | None = None) -> list[Obj]:
        query = {"label_selector": ",".join(f"{k}={v}" for k, v in selector.items())} if selector else {}
        answer = await self._call(api_version, kind, "list", namespace, **query)
        return list(answer.get("items", ()))

    async def _call(self, api_version: str, kind: str, verb: str, namespace: str | None, **kwargs: Any) -> Obj:
        method, coordinates = self._method(api_version, kind, verb, namespace)
        return await asyncio.to_thread(self._blocking, method, **coordinates, **kwargs)

    def _method(self, api_version: str, kind: str, verb: str,
                namespace: str | None) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The typed method for `verb` on this kind and the keyword arguments that address it."""
        where: dict[str, Any] = {} if namespace is None else {"namespace": namespace}
        scope = "cluster" if namespace is None else "namespaced"
        if (api_version, kind) in _CUSTOM:
            group, version = api_version.split("/")
            api = kubernetes.client.CustomObjectsApi(self._api)
            method = getattr(api, f"{'get' if verb == 'read' else verb}_{scope}_custom_object")
            return method, {"group": group, "version": version, "plural": _CUSTOM[(api_version, kind)], **where}
        cls_name, suffix = _BUILTIN[(api_version, kind)]
        api = getattr(kubernetes.client, cls_name)(self._api)
        if namespace is None:
            return getattr(api, f"{verb}_{suffix}_for_all_namespaces"), {}
        return getattr(api, f"{verb}_namespaced_{suffix}"), where

    @staticmethod
    def _blocking(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        try:
            response = method(*args, _preload_content=False, **kwargs)
        except kubernetes.client.ApiException as exc:
            error = Conflict if exc.status == 409 else KubeError
            raise error(exc.status or 0, str(exc.reason)) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # no answer: refused, reset, timed out
            raise KubeError(0, str(exc)) from exc
        return json.loads(response.data)
