"""Just enough of Kubernetes' protobuf encoding to read the two review requests kubectl sends in it.

Development emulator, not for production. Pure. `kubectl auth can-i`, `kubectl create token` and
`kubectl drain` send their SelfSubjectAccessReview, TokenRequest and Eviction as protobuf only;
every other protobuf body is refused with 415 (see routes.py). The envelope is the `k8s\\0` magic
and a `runtime.Unknown` whose field 2 holds the object; the field numbers below are those of
`k8s.io/api`'s generated.proto.
"""

from __future__ import annotations

from collections.abc import Iterator

from liveplex.emulator.apiserver import errors

MAGIC = b"k8s\x00"


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise errors.bad_request("the protobuf body is truncated")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message: varints as ints, length-delimited as bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire == 2:
            size, at = _varint(data, at)
            yield number, data[at:at + size]
            at += size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise errors.bad_request(f"unsupported protobuf wire type {wire}")


def _message(data: bytes, names: dict[int, str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for number, value in fields(data):
        name = names.get(number)
        if name is not None:
            out[name] = value.decode() if isinstance(value, bytes) else value
    return out


def unwrap(body: bytes) -> bytes:
    """The object inside the `k8s\\0` envelope."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("the protobuf body lacks the k8s envelope")
    return next((v for n, v in fields(body[len(MAGIC):]) if n == 2 and isinstance(v, bytes)), b"")


_RESOURCE = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
_NON_RESOURCE = {1: "path", 2: "verb"}


def _spec(body: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The fields of the enveloped object's field 2 (the reviews' `spec`, an Eviction's `deleteOptions`)."""
    for number, value in fields(unwrap(body)):
        if number == 2 and isinstance(value, bytes):
            yield from fields(value)


def access_review(body: bytes) -> dict:
    """A SelfSubjectAccessReview's JSON form from its protobuf."""
    spec: dict = {}
    for number, attrs in _spec(body):
        if number in (1, 2) and isinstance(attrs, bytes):
            key, names = ("resourceAttributes", _RESOURCE) if number == 1 else ("nonResourceAttributes", _NON_RESOURCE)
            spec[key] = _message(attrs, names)
    return {"spec": spec}


def token_request(body: bytes) -> dict:
    """A TokenRequest's JSON form (audiences and expirationSeconds) from its protobuf."""
    spec: dict = {}
    for number, item in _spec(body):
        if number == 1 and isinstance(item, bytes):
            spec.setdefault("audiences", []).append(item.decode())
        elif number == 4 and isinstance(item, int):
            spec["expirationSeconds"] = item
    return {"spec": spec}


def eviction(body: bytes) -> dict:
    """An Eviction's JSON form (its deleteOptions' grace period and dryRun) from its protobuf."""
    options: dict = {}
    for number, item in _spec(body):
        if number == 1 and isinstance(item, int):
            options["gracePeriodSeconds"] = item
        elif number == 5 and isinstance(item, bytes):
            options.setdefault("dryRun", []).append(item.decode())
    return {"deleteOptions": options}
