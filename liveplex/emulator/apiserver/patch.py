"""Patch application: JSON merge patch (RFC 7386), JSON Patch (RFC 6902), strategic merge (approximate).

Development emulator, not for production. Pure: every function takes plain JSON values and returns
a new value; inputs are never mutated. The merges are written as recursive walkers and run by
`deep.run`, so a patch as deep as a body may be (10,000 levels) costs no Python stack.

The strategic merge patch is an approximation. kube-apiserver reads each list's `patchMergeKey` and
`patchStrategy` from the Go types; here one table (`MERGE_KEYS`) names the merge key by field
name, whatever the path (`containers` by `name`, container `ports` by `containerPort`, Service
`ports` by `port`, ...), lists not in it are replaced, and `finalizers` merge as a set. The
directives kubectl's client-side apply emits are honoured: `$patch: replace|delete|merge`,
`$retainKeys`, `$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.
"""

from __future__ import annotations

from collections.abc import Callable

from liveplex.emulator.apiserver import deep, errors

Json = object

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "conditions": "type",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
}
"""List field -> merge key; `ports` is decided by its items (`containerPort` or `port`)."""

SET_LISTS = frozenset({"finalizers"})
"""Primitive lists merged as sets (patchStrategy: merge on a []string)."""


def merge_patch(target: Json, patch: Json) -> Json:
    """RFC 7386: objects merge recursively, `null` deletes a key, anything else (lists too) replaces."""
    return deep.run(_merge(target, patch))


def _merge(target: Json, patch: Json) -> deep.Walk[Json]:
    if not isinstance(patch, dict):
        return deep.clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = yield _merge(out.get(key), value)
    return out


# --- JSON Patch -----------------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise errors.unprocessable(f"JSON pointer {path!r} does not start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, path: str, *, appending: bool) -> int:
    if appending and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise errors.unprocessable(f"invalid array index {token!r} in {path!r}")
    index = int(token)
    if index > len(container) or (not appending and index == len(container)):
        raise errors.unprocessable(f"array index {index} out of range in {path!r}")
    return index


def _parent(doc: Json, tokens: list[str], path: str) -> Json:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, appending=False)]
        else:
            raise errors.unprocessable(f"path {path!r} does not exist")
    return node


def _locate(doc: Json, path: str, *, appending: bool = False) -> tuple[dict | list, str | int]:
    """The container `path` points into and the key or index inside it (`path` is not the root)."""
    tokens = _pointer(path)
    parent = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        return parent, tokens[-1]
    if isinstance(parent, list):
        return parent, _index(parent, tokens[-1], path, appending=appending)
    raise errors.unprocessable(f"path {path!r} does not exist")


def _existing(doc: Json, path: str) -> tuple[dict | list, str | int]:
    parent, key = _locate(doc, path)
    if isinstance(parent, dict) and key not in parent:
        raise errors.unprocessable(f"path {path!r} does not exist")
    return parent, key


def _get(doc: Json, path: str) -> Json:
    if not path:
        return doc
    parent, key = _existing(doc, path)
    if isinstance(parent, dict):
        return parent[key]
    assert isinstance(key, int)  # `_locate` indexes a list with an int
    return parent[key]


def _add(doc: Json, path: str, value: Json) -> Json:
    if not path:
        return value
    parent, key = _locate(doc, path, appending=True)
    if isinstance(parent, dict):
        parent[key] = value
    else:
        assert isinstance(key, int)  # `_locate` indexes a list with an int
        parent.insert(key, value)
    return doc


def _remove(doc: Json, path: str) -> Json:
    if not path:
        raise errors.unprocessable("cannot remove the document root")
    parent, key = _existing(doc, path)
    if isinstance(parent, list):
        assert isinstance(key, int)  # `_locate` indexes a list with an int
        del parent[key]
    else:
        del parent[key]
    return doc


MAX_OPERATIONS = 10_000
"""apiserver/pkg/endpoints/handlers/patch.go `maxJSONPatchOperations`: more is 413."""
_OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")


def _checked_operations(operations: Json) -> list[dict]:
    """`operations`, checked as upstream checks them: not a list of objects is 400
    (jsonpatch.DecodePatch), too many 413, a malformed operation 422 (its Apply), and all of it
    before any operation is applied."""
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise errors.bad_request("a JSON Patch must be a list of operations (JSON objects)")
    if len(operations) > MAX_OPERATIONS:
        raise errors.too_large(f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, "
                               f"got {len(operations)}")
    for n, op in enumerate(operations):
        name = op.get("op")
        if name not in _OPERATIONS:
            raise errors.unprocessable(f"operation {n}: unexpected kind {name!r}")
        for field in ("path", "from") if name in ("move", "copy") else ("path",):
            if not isinstance(op.get(field), str):
                raise errors.unprocessable(f"operation {n} ({name}): missing or non-string {field!r}")
        if name in ("add", "replace", "test") and "value" not in op:
            raise errors.unprocessable(f"operation {n} ({name}) at {op['path']!r} has no value")
    return operations


def json_patch(doc: Json, operations: Json) -> Json:
    """RFC 6902, atomically: a failed `test` or a missing path raises 422 and changes nothing."""
    checked = _checked_operations(operations)
    out = deep.clone(doc)
    for op in checked:
        name, path = op["op"], op["path"]
        if name == "add":
            out = _add(out, path, deep.clone(op["value"]))
        elif name == "remove":
            out = _remove(out, path)
        elif name == "replace":
            out = _add(_remove(out, path), path, deep.clone(op["value"])) if path else deep.clone(op["value"])
        elif name in ("move", "copy"):
            value = deep.clone(_get(out, op["from"]))
            if name == "move":
                out = _remove(out, op["from"])
            out = _add(out, path, value)
        elif not deep.equal(_get(out, path), op["value"]):  # test
            raise errors.unprocessable(f"testing value {path} failed")
    return out


# --- strategic merge patch ------------------------------------------------------------------------

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _merge_key(field: str, items: list) -> str | None:
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return MERGE_KEYS.get(field)


def _go_map(item: dict) -> str:
    """A patch item as Go's `%v` prints a map, for upstream's messages."""
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(item.items())) + "]"


def _merge_list(field: str, target: list, patch: list) -> deep.Walk[list]:
    if field in SET_LISTS:
        return list(target) + [v for v in patch if not deep.contains(target, v)]
    key = _merge_key(field, list(patch) + list(target))
    if key is None or not all(isinstance(i, dict) for i in patch):
        if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
            return [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return deep.clone(patch)
    for item in patch:  # strategicpatch mergeSliceWithSpecialElements; upstream's 500s, 400 here
        if item.get("$patch") == "delete" and key not in item:
            raise errors.bad_request(f"map: {_go_map(item)} does not contain declared merge key: {key}")
        if item.get("$patch") == "merge":
            raise errors.bad_request("merging lists cannot yet be specified in the patch")
    if any(i.get("$patch") == "replace" for i in patch):
        return [deep.clone(i) for i in patch if "$patch" not in i]
    out = [deep.clone(i) for i in target]
    for item in patch:
        at = next((n for n, t in enumerate(out) if isinstance(t, dict) and deep.equal(t.get(key), item.get(key))),
                  None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append((yield _strategic({}, {k: v for k, v in item.items() if k != "$patch"})))
        else:
            out[at] = yield _strategic(out[at], item)
    return out


def _ordered(items: list, order: list, key: Callable[[Json], Json]) -> list:
    """Items in `order` come first in that order, the rest keep their relative order after them."""
    rank = {deep.dumps(v): n for n, v in enumerate(order)}
    return sorted(items, key=lambda i: rank.get(deep.dumps(key(i)), len(rank)))


_DIRECTIVES = ("replace", "merge", "delete")


def _check_directives(root: dict) -> None:
    """The directives' shapes, in upstream's words (apimachinery/pkg/util/mergepatch/errors.go; handlers/patch.go
    interpretStrategicMergePatchError answers the format errors 400 and a retainKeys mismatch 422; an unknown
    `$patch` is a 500 there, a 400 here), in every object of the patch, once."""
    stack = [root]
    while stack:
        patch = stack.pop()
        _check_object(patch)
        for value in patch.values():
            stack += [value] if isinstance(value, dict) else [i for i in value if isinstance(i, dict)] \
                if isinstance(value, list) else []


def _check_object(patch: dict) -> None:
    directive = patch.get("$patch")
    if directive is not None and directive not in _DIRECTIVES:
        raise errors.bad_request(f"unknown patch type: {str(directive)[:100]}")
    retain = patch.get("$retainKeys")
    if retain is not None and not (isinstance(retain, list) and all(isinstance(k, str) for k in retain)):
        raise errors.bad_request("invalid patch format of retainKeys")
    for key, value in patch.items():
        if key.startswith(_ORDER) and not isinstance(value, list):
            raise errors.bad_request("invalid patch format of setElementOrder list")
        if key.startswith(_DELETE_PRIMITIVE) and not isinstance(value, list):
            raise errors.bad_request("invalid patch format of primitive list")
    if isinstance(retain, list) and any(not k.startswith("$") and v is not None and k not in retain
                                        for k, v in patch.items()):
        raise errors.unprocessable("patch content doesn't match retainKeys list")


def strategic_merge_patch(target: Json, patch: Json) -> Json:
    """The approximation described in the module docstring."""
    if isinstance(patch, dict):
        _check_directives(patch)
    return deep.run(_strategic(target, patch))


def _strategic(target: Json, patch: Json) -> deep.Walk[Json]:
    if not isinstance(patch, dict):
        return deep.clone(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    base: dict = {} if directive == "replace" or not isinstance(target, dict) else dict(target)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith((_ORDER, _DELETE_PRIMITIVE)):
            continue
        if value is None:
            base.pop(key, None)
        elif isinstance(value, list) and isinstance(base.get(key), list):
            base[key] = yield _merge_list(key, base[key], value)
        elif isinstance(value, list):
            items = []
            for v in value:
                if not isinstance(v, dict):
                    items.append(v)
                elif v.get("$patch") != "delete":
                    items.append((yield _strategic({}, v)))
            base[key] = items
        else:
            merged = yield _strategic(base.get(key), value)
            if merged is None:
                base.pop(key, None)
            else:
                base[key] = merged
    for key, value in patch.items():
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            if isinstance(base.get(field), list):
                base[field] = [v for v in base[field] if not deep.contains(value, v)]
        elif key.startswith(_ORDER):
            field = key[len(_ORDER):]
            items = base.get(field)
            if isinstance(items, list):
                merge_key = _merge_key(field, items)
                base[field] = _ordered(items, [o.get(merge_key) if isinstance(o, dict) else o for o in value],
                                       lambda i, k=merge_key: i.get(k) if isinstance(i, dict) else i)
    if isinstance(retain, list):
        base = {k: v for k, v in base.items() if k in retain}
    return base
