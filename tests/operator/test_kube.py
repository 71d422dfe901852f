"""The official-client adapter speaks the right REST: paths, verbs, merge-patch content type, errors."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes
import pytest

from liveplex.operator import Conflict, KubeError, Ref, kube

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pp", "namespace": "voice"}}


class _Recorder(BaseHTTPRequestHandler):
    """Answers from `server.answers[(method, path)]` and records every request."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.requests.append((self.command, self.path, self.headers.get("Content-Type"), body))
        status, payload = self.server.answers.get((self.command, self.path.split("?")[0]), (404, {"kind": "Status"}))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    srv.requests, srv.answers = [], {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def _client(port: int) -> kube.OfficialClient:
    config = kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}")
    config.retries = 0
    return kube.OfficialClient(kubernetes.client.ApiClient(config))


async def test_get_create_patch_and_list_address_the_right_paths(server: ThreadingHTTPServer) -> None:
    path = "/apis/apps/v1/namespaces/voice/deployments"
    server.answers = {("POST", path): (201, DEPLOYMENT), ("PATCH", f"{path}/pp"): (200, DEPLOYMENT),
                      ("GET", "/api/v1/namespaces/voice/pods"): (200, {"items": [{"metadata": {"name": "a"}}]}),
                      ("GET", "/apis/live.liveplex.io/v1alpha1/liveengines"): (200, {"items": []})}
    client = _client(server.server_address[1])
    assert await client.get(Ref("apps/v1", "Deployment", "voice", "pp")) is None
    assert await client.create(DEPLOYMENT) == DEPLOYMENT
    await client.patch(Ref("apps/v1", "Deployment", "voice", "pp"), {"spec": {"replicas": 2}})
    pods = await client.list("v1", "Pod", "voice", {"app.kubernetes.io/instance": "pp"})
    assert pods == [{"metadata": {"name": "a"}}]
    assert await client.list("live.liveplex.io/v1alpha1", "LiveEngine", None) == []
    methods = [(m, p.split("?")[0]) for m, p, _, _ in server.requests]
    assert methods == [("GET", f"{path}/pp"), ("POST", path), ("PATCH", f"{path}/pp"),
                       ("GET", "/api/v1/namespaces/voice/pods"), ("GET", "/apis/live.liveplex.io/v1alpha1/liveengines")]
    _, _, content_type, body = server.requests[2]
    assert content_type == "application/merge-patch+json" and body == {"spec": {"replicas": 2}}
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(server.requests[3][1]).query)
    assert query == {"labelSelector": ["app.kubernetes.io/instance=pp"]}


async def test_a_409_is_a_conflict_and_a_refused_connection_is_transient(server: ThreadingHTTPServer) -> None:
    server.answers = {("POST", "/api/v1/namespaces/voice/services"): (409, {"kind": "Status"})}
    with pytest.raises(Conflict):
        await _client(server.server_address[1]).create(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pp", "namespace": "voice"}})
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KubeError) as caught:
        await _client(port).get(Ref("v1", "Pod", "voice", "x"))
    assert caught.value.transient


async def test_delete_addresses_the_autoscalers_and_a_missing_object_is_no_error(server: ThreadingHTTPServer) -> None:
    hpa = "/apis/autoscaling/v2/namespaces/voice/horizontalpodautoscalers/pp"
    server.answers[("DELETE", hpa)] = (200, {"kind": "Status", "status": "Success"})
    client = _client(server.server_address[1])
    await client.delete(Ref("autoscaling/v2", "HorizontalPodAutoscaler", "voice", "pp"))
    await client.delete(Ref("keda.sh/v1alpha1", "ScaledObject", "voice", "pp"))  # 404: KEDA or the object absent
    assert [(m, p) for m, p, _, _ in server.requests] == [
        ("DELETE", hpa), ("DELETE", "/apis/keda.sh/v1alpha1/namespaces/voice/scaledobjects/pp")]
    server.answers[("GET", "/apis/keda.sh/v1alpha1/namespaces/voice/scaledobjects")] = (404, {"kind": "Status"})
    with pytest.raises(KubeError) as caught:
        await client.list("keda.sh/v1alpha1", "ScaledObject", "voice")
    assert caught.value.status == 404
