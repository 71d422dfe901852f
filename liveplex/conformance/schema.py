"""Strict JSON Schemas of the GPT-Live server events, derived from the official SDK's models.

gpt-live §12.4: the SDK accepts almost anything, so the checker validates raw JSON itself. Each
member of `openai.types.live.ConnectServerEvent` becomes a JSON Schema through pydantic's
`TypeAdapter`; every object schema in it is then closed (`additionalProperties: false`) so an
undeclared key at any level fails. JSON integers are strict: `5.0` is not an integer here, though
draft 2020-12 would accept it, because a client that decodes `expires_at` as an int must not get a
float. Pin `openai==3.51.0`: a schema bump is a deliberate change. The fields openai 3.57 added
to the server events (`NEWER_FIELDS`) are declared on top, so a server that serves 3.57 clients
passes too, and the checker still runs under the pinned SDK.
"""

from __future__ import annotations

import copy
import functools
import types
import typing
from collections.abc import Mapping

import jsonschema
import jsonschema.protocols
import jsonschema.validators
import pydantic
from openai.types.live import connect_server_event

JsonSchema = dict[str, object]
_S = typing.TypeVar("_S")

_STRICT_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
)
_StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, type_checker=_STRICT_TYPES
)


def server_event_models() -> tuple[type[pydantic.BaseModel], ...]:
    """The SDK's server event models: the members of the `ConnectServerEvent` union (28)."""
    union = typing.get_args(connect_server_event.ConnectServerEvent)[0]
    return typing.get_args(union)


def event_type(model: type[pydantic.BaseModel]) -> str:
    """The `type` literal a server event model declares, e.g. `session.started`."""
    (literal,) = typing.get_args(model.model_fields["type"].annotation)
    return str(literal)


def close_objects(schema: _S) -> _S:
    """A deep copy of `schema` with `additionalProperties: false` on every object schema.

    An object schema is one with `type: object` or `properties`; `$defs` and combinators are
    walked, so referenced definitions are closed too.
    """
    schema = copy.deepcopy(schema)
    _close_in_place(schema)
    return schema


def _close_in_place(node: object) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            node["additionalProperties"] = False
        for value in node.values():
            _close_in_place(value)
    elif isinstance(node, list):
        for item in node:
            _close_in_place(item)


_NULLABLE_STRING: JsonSchema = {"anyOf": [{"type": "string"}, {"type": "null"}]}
_NULLABLE_INTEGER: JsonSchema = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
NEWER_FIELDS: Mapping[str, Mapping[str, JsonSchema]] = {
    "SessionResource": {"safety_identifier": _NULLABLE_STRING},
    "SessionUsage": {"active_seconds": _NULLABLE_INTEGER, "paused_seconds": _NULLABLE_INTEGER},
}
"""openai 3.57's additions to the server events' models (its `SessionResource` and `SessionUsage`),
by model name: optional fields the pinned 3.51 lacks."""


def add_newer_fields(schema: JsonSchema) -> JsonSchema:
    """`schema` with `NEWER_FIELDS` declared in the definitions it has (in place; returned)."""
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        for name, fields in NEWER_FIELDS.items():
            model = defs.get(name)
            if isinstance(model, dict):
                model.setdefault("properties", {}).update(copy.deepcopy(dict(fields)))
    return schema


@functools.cache
def server_schemas() -> Mapping[str, JsonSchema]:
    """Closed JSON Schemas of every SDK server event, by `type` (read-only)."""
    schemas: dict[str, JsonSchema] = {
        event_type(model): close_objects(add_newer_fields(pydantic.TypeAdapter(model).json_schema()))
        for model in server_event_models()
    }
    return types.MappingProxyType(schemas)


@functools.cache
def validator(type_: str) -> jsonschema.protocols.Validator:
    """A compiled strict validator for one server event type (KeyError if the SDK has none)."""
    return _StrictValidator(server_schemas()[type_])
