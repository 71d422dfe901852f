"""Request bodies at the edge: size, media type, parsing, and values only a JSON decoder produces.

Development emulator, not for production. Pure. Every body a handler reads passes `parse` first, so
nothing below it sees what a real API server never lets through: a body over `MAX_BYTES` (413,
kube-apiserver's `MaxRequestBodyBytes`), a media type the endpoint does not take (415), text that is
not JSON (or YAML where YAML is taken), and values Go's JSON decoder never yields (400): nesting
deeper than `MAX_DEPTH`, strings that are not UTF-8 (a lone surrogate from a YAML escape), numbers
that are not finite or beyond 64 bits, keys that are not strings. YAML is read without aliases and
without timestamps (as sigs.k8s.io/yaml hands go-yaml's tree to the JSON decoder: a timestamp stays a
string, an integer or boolean key becomes its text).
"""

from __future__ import annotations

import math

import orjson
import yaml
from yaml.composer import ComposerError

from liveplex.emulator.apiserver import errors

MAX_BYTES = 3 * 1024 * 1024
"""k8s.io/apiserver/pkg/server/config.go `MaxRequestBodyBytes`: a larger body is 413."""
MAX_DEPTH = 128
"""Objects and lists nested deeper are refused (400). Upstream's JSON decoder allows 10,000; the
emulator stops far lower because every stored object must still serialize inside a list, a watch
event and a Table (orjson's own limit is 254 levels) and be walked by recursive validation; no
Kubernetes object liveplex or its clients write comes near it (a CRD schema nests ~2 levels per field)."""

JSON = "application/json"
YAML = "application/yaml"
OBJECT_TYPES = (JSON, YAML)
"""What a create, an update or a DeleteOptions body may be sent as."""


def media_type(content_type: str) -> str:
    """`application/json; charset=utf-8` -> `application/json`; no header at all reads as JSON."""
    return content_type.split(";")[0].strip().lower() or JSON


def parse(raw: bytes, media: str) -> object:
    """The JSON value of a body in `media` (JSON, or YAML for a YAML media type); 400 or 413 otherwise."""
    if len(raw) > MAX_BYTES:
        raise errors.too_large(f"limit is {MAX_BYTES}")
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)  # valid UTF-8, finite numbers, string keys: only the depth is left to check
    except orjson.JSONDecodeError as exc:
        if "yaml" not in media:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None
        value = _yaml(raw)
        check(value, values=True)
        return value
    check(value)
    return value


def check(value: object, values: bool = False) -> None:
    """400 for nesting past `MAX_DEPTH` and, with `values`, for anything else no JSON decoder yields
    (see the module docstring). Iterative, so a deep value costs no Python stack; the path of what
    it refuses is put together only then."""
    stack: list[tuple[object, int, tuple | None]] = [(value, 0, None)]
    while stack:
        node, depth, where = stack.pop()
        if isinstance(node, dict):
            if depth >= MAX_DEPTH:
                raise errors.malformed(f"the request body nests deeper than {MAX_DEPTH} levels (at {_path(where)})")
            for key, sub in node.items():
                if values and (not isinstance(key, str) or not _utf8(key)):
                    raise errors.malformed(f"{_path(where)}: map key {key!r} is not a JSON string")
                stack.append((sub, depth + 1, (where, key)))
        elif isinstance(node, list):
            if depth >= MAX_DEPTH:
                raise errors.malformed(f"the request body nests deeper than {MAX_DEPTH} levels (at {_path(where)})")
            stack.extend((sub, depth + 1, (where, n)) for n, sub in enumerate(node))
        elif values and not _json_scalar(node):
            raise errors.malformed(f"{_path(where)}: {str(node)[:40]!r} ({type(node).__name__}) has no JSON form "
                                     "(a lone surrogate, a number out of range, not a JSON type)")


def _json_scalar(node: object) -> bool:
    if isinstance(node, str):
        return _utf8(node)
    if isinstance(node, bool) or node is None:
        return True
    if isinstance(node, int):
        return -(2 ** 63) <= node < 2 ** 64
    return isinstance(node, float) and math.isfinite(node)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path(where: tuple | None) -> str:
    """`metadata.labels[x]`-style path of a (parent, key) chain; `the root` for None."""
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "".join(reversed(parts)).lstrip(".") or "the root"


def _json_key(key: object) -> str:
    """sigs.k8s.io/yaml's conversion of a map key: integers and booleans become their text."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    raise errors.bad_request(f"map key {key!r} ({type(key).__name__}) cannot be a JSON object key")


class _Loader(yaml.SafeLoader):
    """`yaml.safe_load` without aliases, without timestamps and no deeper than `MAX_DEPTH`."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise ComposerError(None, None, "YAML aliases are not accepted", self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)  # type: ignore[arg-type]  # PyYAML: its stubs say int; a mapping's value gets its key node
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        """Pairs in order, each key as JSON's (a dict of Python keys would merge `1` and `true`)."""
        self.flatten_mapping(node)
        return {_json_key(self.construct_object(k, deep=deep)): self.construct_object(v, deep=deep)
                for k, v in node.value}


def _yaml(raw: bytes) -> object:
    try:
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader without aliases
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the request body is not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise errors.bad_request(f"the request body is not valid UTF-8: {exc}") from None
