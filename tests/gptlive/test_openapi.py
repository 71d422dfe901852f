"""Every HTTP route of pods and gateways is in its listener's `/openapi.json`, and answers as that
document says: each route is called with valid input and with a wrong value for each of its query
parameters, and every answer's status is one the document lists, its body valid against the schema
it gives (errors in OpenAI's shape, naming the parameter). The GPT-Live routes' models are the
`openai` SDK's own types, field for field.

Real servers: a pod in this process with API keys (so the 401s are exercised too), and a gateway
over a sim pod as processes.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, NotRequired, Required

import httpx
import jsonschema
import openai.types
import pydantic
from openai.types.live import live_create_params, live_create_response, session_fork_params, session_fork_response
from typing_extensions import is_typeddict

from liveplex.gptlive.server import api
from tests.support import platform, pods

KEY = "openapi-key"

BODIES: dict[str, tuple[str, bytes]] = {
    "application/json": ("application/json",
                         b'{"session": {"model": "gpt-live-1"}, "transport": {"type": "webrtc", "sdp": "v=0"}}'),
    "application/octet-stream": ("application/octet-stream", b"not a blob"),
}
"""A body of each content type a route takes: well formed, refused for what it says (a 400 the
document lists), so that no test session starts."""

LAST = ("/drain",)
"""Called last: they change the server (a drain stops it taking sessions)."""


def _validate(doc: dict[str, Any], schema: dict[str, Any], body: object, where: str) -> None:
    """`body` against `schema`, whose `$ref`s point into `doc`'s components."""
    jsonschema.Draft202012Validator({**schema, "components": doc["components"]}).validate(body)


def _check(doc: dict[str, Any], op: dict[str, Any], response: httpx.Response, where: str) -> None:
    """The answer's status is documented, and its body is what the document says for it."""
    documented = op["responses"].get(str(response.status_code))
    assert documented is not None, f"{where}: {response.status_code} is not in {sorted(op['responses'])}"
    content = documented.get("content", {})
    kind = response.headers.get("content-type", "").split(";")[0]
    if kind == "application/json":
        assert "application/json" in content, f"{where}: JSON where the document says {sorted(content)}"
        _validate(doc, content["application/json"]["schema"], response.json(), where)
    else:
        assert kind in content, f"{where}: {kind!r} where the document says {sorted(content)}"


def _wrong(schema: dict[str, Any]) -> str | None:
    """A query value its schema refuses: a word for a number, -1 where it must be >= 0."""
    types = {s.get("type") for s in schema.get("anyOf", [schema])}
    if types & {"integer", "number"}:
        return "-1" if "minimum" in str(schema) else "abc"
    return None


async def walk(root: str, headers: dict[str, str]) -> list[str]:
    """Call every operation of `root`'s document; the routes called."""
    async with httpx.AsyncClient(base_url=root, headers=headers, timeout=20) as http:
        doc = (await http.get("/openapi.json")).json()
        ops = [(path, method, op) for path, methods in doc["paths"].items() for method, op in methods.items()]
        ops.sort(key=lambda o: o[0] in LAST)
        called = []
        for path, method, op in ops:
            url = path.format(**{p["name"]: "sess_absent" for p in op.get("parameters", []) if p["in"] == "path"})
            body = op.get("requestBody", {}).get("content", {})
            kind, data = next((BODIES[k] for k in body), ("", b""))
            send = {"content": data, "headers": {"content-type": kind}} if kind else {}
            for param in op.get("parameters", []):
                wrong = _wrong(param["schema"]) if param["in"] == "query" else None
                if wrong is None:
                    continue
                where = f"{method.upper()} {path}?{param['name']}={wrong}"
                refused = await http.request(method, url, params={param["name"]: wrong}, **send)
                assert refused.status_code == 400, f"{where}: {refused.status_code} {refused.text}"
                assert refused.json()["error"]["param"] == param["name"], where
                _check(doc, op, refused, where)
            answered = await http.request(method, url, params={"deadline_s": "0"} if path in LAST else None,
                                          **send)
            _check(doc, op, answered, f"{method.upper()} {path}")
            called.append(f"{method.upper()} {path}")
        return called


async def test_a_pods_listeners_answer_as_their_documents_say(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    async with pods.in_process("--api-key-file", str(keys)) as pod:
        public = await walk(pod.root, {"Authorization": f"Bearer {KEY}"})
        keyless = await walk(pod.root, {})  # every guarded route's 401 is documented too
        admin = await walk(pod.admin_root, {})
    assert public == keyless
    assert {"GET /v1/models", "GET /v1/audio/voices", "POST /v1/live/sessions", "GET /v1/live/ice_servers",
            "GET /live/config", "GET /live/stats", "GET /ready", "GET /health", "GET /",
            "POST /live/handover", "POST /live/handover/resume", "POST /live/handover/{session_id}"} == set(public)
    assert {"GET /health", "GET /ready", "GET /live/config", "GET /live/stats", "GET /metrics",
            "GET /drain", "POST /drain"} == set(admin)


async def test_a_gateways_listeners_answer_as_their_documents_say(redis_url: str, tmp_path: Path) -> None:
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=("--store-dir", str(tmp_path))) as running:
        public = await walk(running.gateway.root, {})
        admin = await walk(running.gateway.admin_root, {})
    assert {"GET /v1/models", "POST /v1/live/sessions", "GET /v1/live/ice_servers", "GET /live/config",
            "GET /live/stats", "GET /ready", "GET /health", "GET /", "GET /v1/live/sessions/{session_id}/content",
            "POST /v1/live/sessions/{session_id}/hangup", "POST /v1/live/sessions/{session_id}/fork"} == set(public)
    assert {"GET /health", "GET /ready", "GET /live/config", "GET /live/stats", "GET /metrics",
            "GET /drain", "POST /drain"} == set(admin)


def _shape(model: object) -> dict[str, Any]:
    """A model's fields, whether each is required, and the shape of each nested model: a pydantic
    model's (ours, the SDK's responses) or a TypedDict's (the SDK's request params)."""
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
        fields = {name: (f.is_required(), f.annotation) for name, f in model.model_fields.items()}
    else:
        hints = typing.get_type_hints(model, include_extras=True)  # the SDK marks `Required[...]` in a total=False
        fields = {name: (typing.get_origin(hint) is Required, _bare(hint)) for name, hint in hints.items()}
    out: dict[str, Any] = {}
    for name, (required, hint) in fields.items():
        inner = [a for a in (typing.get_args(hint) or (hint,)) if isinstance(a, type)]
        nested = next((a for a in inner if issubclass(a, pydantic.BaseModel) or is_typeddict(a)), None)
        out[name] = (required, _shape(nested) if nested is not None and nested is not dict else None)
    return out


def _bare(hint: Any) -> Any:
    """A TypedDict key's type without `Required[...]`/`NotRequired[...]`."""
    return typing.get_args(hint)[0] if typing.get_origin(hint) in (Required, NotRequired) else hint


def test_the_gptlive_routes_models_are_the_sdks() -> None:
    assert _shape(api.Model) == _shape(openai.types.Model)
    assert _shape(api.LiveCreateResponse) == _shape(live_create_response.LiveCreateResponse)
    assert _shape(api.WebRtcTransport) == _shape(live_create_params.Transport)
    ours, theirs = _shape(api.LiveCreateRequest), _shape(live_create_params.LiveCreateParams)
    assert {k: v[0] for k, v in ours.items()} == {k: v[0] for k, v in theirs.items()}
    assert ours["transport"] == theirs["transport"]  # the session is MediaSessionConfig, checked as a start is
    assert _shape(api.LiveCreateResponse) == _shape(session_fork_response.SessionForkResponse)
    ours, theirs = _shape(api.LiveForkRequest), _shape(session_fork_params.SessionForkParams)
    assert {k: v[0] for k, v in ours.items()} == {k: v[0] for k, v in theirs.items()}
    assert ours["transport"] == theirs["transport"]  # the session is the overrides, checked as a fork's are
