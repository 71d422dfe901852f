"""Request bodies at the edge: size, media type, parsing, and values only a JSON decoder produces.

Development emulator, not for production. Pure. Every body a handler reads passes `parse` first, so
nothing below it sees what a real API server never lets through: a body over `MAX_BYTES` (413,
kube-apiserver's `MaxRequestBodyBytes`), a media type the endpoint does not take (415), text that is
not JSON (or YAML where YAML is taken), and values Go's JSON decoder never yields (400): nesting
deeper than `MAX_DEPTH`, strings that are not UTF-8 (a lone surrogate from a YAML escape), numbers
that are not finite or beyond 64 bits, keys that are not strings. YAML is read without aliases and
without timestamps (as sigs.k8s.io/yaml hands go-yaml's tree to the JSON decoder: a timestamp stays a
string, an integer or boolean key becomes its text). `strict_errors` says what a strict decoder
(`fieldValidation=Strict`) adds: the keys an object repeats.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.scanner import ScannerError

from liveplex.emulator.apiserver import deep, errors

MAX_BYTES = 3 * 1024 * 1024
"""k8s.io/apiserver/pkg/server/config.go `MaxRequestBodyBytes`: a larger body is 413."""
MAX_DEPTH = 10_000
"""Objects and lists nested deeper are refused (400): Go's encoding/json `maxNestingDepth`, which
kube-apiserver's decoder (and go-yaml's) keeps. Nothing here walks a whole value recursively
(`deep.py`), so a body this deep costs no Python stack; what follows a CRD's schema is bounded by
the schema's own depth (`crds.MAX_SCHEMA_DEPTH`)."""

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
        value = deep.loads(raw)  # valid UTF-8, finite numbers, string keys: only the depth is left to check
    except json.JSONDecodeError as exc:
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
    """`yaml.SafeLoader` without timestamps; `_yaml` builds values from its events, not its composer."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    # PyYAML's scanner looks at every pending simple key on every token, and an open `[` leaves one
    # pending per level: 10,000 nested flow sequences took 13 s. The keys are kept one per flow level,
    # in level order, which is also token and position order, so the nearest is the first and the
    # stale ones (on an earlier line or over 1024 characters back) are a prefix: the same answers in
    # time linear in the input.

    def next_possible_simple_key(self) -> int | None:
        for key in self.possible_simple_keys.values():
            return key.token_number
        return None

    def stale_possible_simple_keys(self) -> None:
        keys = self.possible_simple_keys
        while keys:
            level, key = next(iter(keys.items()))
            if key.line == self.line and self.index - key.index <= 1024:
                return
            if key.required:
                raise ScannerError("while scanning a simple key", key.mark, "could not find expected ':'",
                                   self.get_mark())
            del keys[level]


_COLLECTIONS: dict[type, tuple[str, type]] = {yaml.MappingStartEvent: ("tag:yaml.org,2002:map", dict),
                                             yaml.SequenceStartEvent: ("tag:yaml.org,2002:seq", list)}
_MERGE = "tag:yaml.org,2002:merge"
_NO_KEY, _MERGE_KEY = object(), object()


@dataclass
class _Open:
    """A collection `_yaml` is building: a mapping keeps the key its next value goes under."""

    container: dict | list
    key: object = _NO_KEY
    line: int = 0
    merges: list[dict] = field(default_factory=list)
    """`<<` merge keys' mappings: their keys fill in what the mapping does not set itself."""


def _yaml(raw: bytes, duplicates: list[str] | None = None) -> object:
    """The single document in `raw`, built from the parser's events with a stack of open collections
    (PyYAML's composer recurses once per level); `duplicates` collects the keys a mapping repeats, in
    go-yaml's strict words."""
    try:
        loader = _Loader(raw)
        try:
            return _document(loader, duplicates)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the request body is not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise errors.bad_request(f"the request body is not valid UTF-8: {exc}") from None


def _document(loader: _Loader, duplicates: list[str] | None) -> object:
    loader.get_event()  # StreamStart
    if loader.check_event(yaml.StreamEndEvent):
        return None
    loader.get_event()  # DocumentStart
    value = _build(loader, duplicates)
    loader.get_event()  # DocumentEnd
    if not loader.check_event(yaml.StreamEndEvent):
        raise ComposerError(None, None, "expected a single document in the stream", loader.peek_event().start_mark)
    return value


def _build(loader: _Loader, duplicates: list[str] | None) -> object:
    stack: list[_Open] = []
    while True:
        event = loader.get_event()
        mark = event.start_mark
        top = stack[-1] if stack else None
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(None, None, "YAML aliases are not accepted", mark)
        if isinstance(event, yaml.CollectionStartEvent):
            if top is not None and isinstance(top.container, dict) and top.key is _NO_KEY:
                raise errors.bad_request("a map key that is a collection cannot be a JSON object key")
            tag, kind = _COLLECTIONS[type(event)]
            if event.tag not in (None, "!", tag):
                raise ConstructorError(None, None, f"the tag {event.tag} is not accepted", mark)
            if len(stack) >= MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            stack.append(_Open(kind()))
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            if done.merges:
                assert isinstance(done.container, dict)  # a merge key is a mapping's only
                for merged in done.merges:
                    for key, sub in merged.items():
                        done.container.setdefault(key, sub)
            value: object = done.container
            top = stack[-1] if stack else None
        else:
            assert isinstance(event, yaml.ScalarEvent)  # the only other event inside a document
            tag = event.tag if event.tag not in (None, "!") else loader.resolve(yaml.ScalarNode, event.value,
                                                                                 event.implicit)
            if tag == _MERGE and top is not None and top.key is _NO_KEY:
                top.key = _MERGE_KEY
                continue
            value = loader.construct_object(yaml.ScalarNode(tag, event.value, mark, event.end_mark, style=event.style))
        if top is None:
            return value
        if isinstance(top.container, list):
            top.container.append(value)
        elif top.key is _NO_KEY:
            top.key, top.line = _json_key(value), mark.line + 1
        elif top.key is _MERGE_KEY:
            items = value if isinstance(value, list) else [value]
            merges = [m for m in items if isinstance(m, dict)]
            if len(merges) != len(items):
                raise ConstructorError(None, None, "expected a mapping or list of mappings for merging", mark)
            top.merges += merges
            top.key = _NO_KEY
        else:
            if duplicates is not None and top.key in top.container:
                duplicates.append(f"line {top.line}: key {json.dumps(top.key)} already set in map")
            top.container[top.key] = value
            top.key = _NO_KEY


def strict_errors(raw: bytes, media: str) -> tuple[str, ...]:
    """What a strict decoder (`fieldValidation=Strict`) finds in a body `parse` took besides unknown
    fields: the keys an object repeats, each as `duplicate field "spec.a"` (sigs.k8s.io/json), or, for
    YAML, go-yaml's one `yaml: unmarshal errors:` with a line per repeated key."""
    if not raw.strip():
        return ()
    found: list[str] = []
    if "yaml" in media:
        _yaml(raw, found)
        return ("yaml: unmarshal errors:\n  " + "\n  ".join(found),) if found else ()
    deep.parse(raw, lambda keys: found.append(f'duplicate field "{deep.path(keys)}"'))
    return tuple(found)
