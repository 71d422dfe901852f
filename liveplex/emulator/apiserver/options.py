"""A request's options: its query parameters and its `Accept` header, read and checked as kube-apiserver does.

Development emulator, not for production. Pure. Query parameters are decoded as upstream's
parameter codec decodes them (apimachinery/pkg/runtime/conversion.go): the first value counts, an
integer is `strconv.ParseInt` (anything else is 400 in its words), a boolean is true unless it is
`0` or `false`. The decoded options are then checked by upstream's validators
(apimachinery/pkg/apis/meta/v1/validation, meta/internalversion/validation): a 422 `Invalid` whose
kind is the options' own (`ListOptions.meta.k8s.io`, `CreateOptions.meta.k8s.io`, ...). A
`resourceVersion` that is not a number is 400 here; upstream's watch cache answers it with a 500
(kubernetes#113939, #139485), its etcd path with a 400. `Accept` is negotiated as
handlers/negotiation does: 406 `NotAcceptable` when no media range names JSON, YAML or protobuf
(custom resources: JSON or YAML) or a conversion other than the Table and metadata forms. YAML and
protobuf are accepted and answered as JSON, which is what the emulator speaks.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from liveplex.emulator.apiserver import errors, selectors, storage, validation
from liveplex.emulator.apiserver.errors import Cause

Query = Mapping[str, Sequence[str]]
"""Each query parameter's values, in order."""

_INT = re.compile(r"[+-]?[0-9]+")
_UINT = re.compile(r"[0-9]+")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_UINT64_MAX = 2 ** 64 - 1


def _first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def query_text(query: Query, name: str) -> str:
    """A string parameter, as the codec takes it: the first value, "" when absent."""
    return _first(query, name) or ""


def _go_error(function: str, text: str, why: str) -> str:
    return f"strconv.{function}: parsing {json.dumps(text, ensure_ascii=False)}: {why}"


def parse_int(text: str) -> int:
    """`strconv.ParseInt(text, 10, 64)`, or its error as upstream's 400 (Python's `int` also takes
    `1_000`, spaces and non-ASCII digits)."""
    if not _INT.fullmatch(text):
        raise errors.bad_request(_go_error("ParseInt", text, "invalid syntax"))
    value = int(text)
    if not _INT64[0] <= value <= _INT64[1]:
        raise errors.bad_request(_go_error("ParseInt", text, "value out of range"))
    return value


def query_int(query: Query, name: str) -> int | None:
    """An integer parameter (`gracePeriodSeconds`, `tailLines`, ...); None when absent."""
    text = _first(query, name)
    return None if text is None else parse_int(text)


def flag(query: Query, name: str) -> bool | None:
    """A boolean parameter (`watch`, ...): true unless `0` or `false`; None when absent."""
    text = _first(query, name)
    return None if text is None else not (text == "0" or text.lower() == "false")


def resource_version(text: str) -> int:
    """A `resourceVersion` as upstream's storage reads it (`""` and `"0"` are 0); 400 when it is not
    an unsigned 64-bit number (upstream: 500 from its watch cache, see the module docstring)."""
    if text in ("", "0"):
        return 0
    if _UINT.fullmatch(text) and int(text) <= _UINT64_MAX:
        return int(text)
    why = "value out of range" if _UINT.fullmatch(text) else "invalid syntax"
    raise errors.bad_request(f"resourceVersion: Invalid value: {json.dumps(text, ensure_ascii=False)}: "
                             + _go_error("ParseUint", text, why))


def _invalid(kind: str, causes: list[Cause]) -> None:
    if causes:
        raise errors.invalid(kind, "meta.k8s.io", "", tuple(causes))


# --- lists and watches ----------------------------------------------------------------------------

NOT_OLDER_THAN, EXACT = "NotOlderThan", "Exact"


@dataclass(frozen=True, slots=True)
class ListOptions:
    labels: selectors.Selector = ()
    fields: tuple[selectors.FieldRequirement, ...] = ()
    """Converted to the paths they select (`selectors.convert_fields`)."""
    watch: bool = False
    bookmarks: bool = False
    """`allowWatchBookmarks`."""
    resource_version: str = ""
    match: str = ""
    """`resourceVersionMatch`."""
    timeout: int | None = None
    """`timeoutSeconds`."""
    limit: int = 0
    continue_token: str = ""
    initial_events: bool | None = None
    """`sendInitialEvents`: None when the client did not say."""


def list_options(query: Query, field_labels: Mapping[str, str] | None) -> ListOptions:
    """A list's or a watch's options, as handlers/get.go's ListResource reads them: decoded (400),
    validated (422, ValidateListOptions with the WatchList feature on, as in v1.32), the field
    selector's labels converted for the kind (400, `selectors.convert_fields`), the resourceVersion
    parsed (400)."""
    options = ListOptions(
        labels=selectors.parse_labels(_first(query, "labelSelector")),
        fields=selectors.parse_fields(_first(query, "fieldSelector")),
        watch=bool(flag(query, "watch")), bookmarks=bool(flag(query, "allowWatchBookmarks")),
        resource_version=query_text(query, "resourceVersion"), match=query_text(query, "resourceVersionMatch"),
        timeout=query_int(query, "timeoutSeconds"), limit=query_int(query, "limit") or 0,
        continue_token=query_text(query, "continue"), initial_events=flag(query, "sendInitialEvents"))
    _invalid("ListOptions", _watch_causes(options) if options.watch else _list_causes(options))
    if options.continue_token and options.resource_version not in ("", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    resource_version(options.resource_version)
    return dataclasses.replace(options, fields=selectors.convert_fields(options.fields, field_labels))


def _match_field(detail: str) -> Cause:
    return validation.forbidden("resourceVersionMatch", detail)


def _list_causes(options: ListOptions) -> list[Cause]:
    causes = []
    if options.match:
        if not options.resource_version:
            causes.append(_match_field("resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if options.continue_token:
            causes.append(_match_field("resourceVersionMatch is forbidden when continue is provided"))
        if options.match not in (EXACT, NOT_OLDER_THAN):
            causes.append(validation.unsupported("resourceVersionMatch", options.match, (EXACT, NOT_OLDER_THAN, "")))
        if options.match == EXACT and options.resource_version == "0":
            causes.append(_match_field('resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if options.initial_events is not None:
        causes.append(validation.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(options: ListOptions) -> list[Cause]:
    causes = []
    if options.initial_events is not None and options.match != NOT_OLDER_THAN:
        causes.append(_match_field(f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
    if options.match:
        if options.initial_events is None:
            causes.append(_match_field("resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                                       "provided"))
        if options.match != NOT_OLDER_THAN:
            causes.append(validation.unsupported("resourceVersionMatch", options.match, (NOT_OLDER_THAN,)))
        if options.continue_token:
            causes.append(_match_field("resourceVersionMatch is forbidden when continue is provided"))
    return causes


# --- writes ---------------------------------------------------------------------------------------

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"


@dataclass(frozen=True, slots=True)
class WriteOptions:
    field_validation: str = WARN
    """`fieldValidation`, Warn when the client names none."""
    dry_run: bool = False


def _dry_run_causes(values: Sequence[str]) -> list[Cause]:
    if all(v == "All" for v in values):
        return []
    shown = "[]string{" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "}"
    return [Cause("dryRun", f'Unsupported value: {shown}: supported values: "All"', "FieldValueNotSupported")]


def write_options(query: Query, kind: str) -> WriteOptions:
    """CreateOptions, UpdateOptions or PatchOptions (`kind`) from the query, 422 where
    ValidateCreateOptions and its siblings refuse them (`force` only belongs to server-side apply,
    which the emulator refuses anyway)."""
    field_validation = query_text(query, "fieldValidation")
    dry_run = list(query.get("dryRun") or ())
    causes = _dry_run_causes(dry_run)
    if field_validation not in ("", IGNORE, STRICT, WARN):
        causes.append(validation.unsupported("fieldValidation", field_validation, ("", IGNORE, STRICT, WARN)))
    if kind == "PatchOptions" and flag(query, "force") is not None:
        causes.append(validation.forbidden("force", "may not be specified for non-apply patch"))
    _invalid(kind, causes)
    return WriteOptions(field_validation or WARN, bool(dry_run))


def delete_options(body: Mapping[str, Any] | None, query: Query) -> storage.DeleteOptions:
    """DeleteOptions from the body when there is one, else from the query (never both, as
    handlers/delete.go reads them), refused (422) where ValidateDeleteOptions refuses them. `body`
    has passed the decoder (`admission.typed_as`), so its fields have their Go types."""
    if body:
        grace, orphan = body.get("gracePeriodSeconds"), body.get("orphanDependents")
        propagation, dry_run = body.get("propagationPolicy"), list(body.get("dryRun") or ())
        pre = body.get("preconditions") or {}
    else:
        grace, orphan = query_int(query, "gracePeriodSeconds"), flag(query, "orphanDependents")
        propagation, dry_run, pre = _first(query, "propagationPolicy"), list(query.get("dryRun") or ()), {}
    causes = []
    if orphan is not None and propagation is not None:
        causes.append(validation.invalid("propagationPolicy", propagation,
                                         "orphanDependents and deletionPropagation cannot be both set"))
    if propagation is not None and propagation not in storage.PROPAGATIONS:
        causes.append(validation.unsupported("propagationPolicy", propagation, (*storage.PROPAGATIONS, "nil")))
    _invalid("DeleteOptions", causes + _dry_run_causes(dry_run))
    return storage.DeleteOptions(grace, "Orphan" if orphan else str(propagation) if propagation else None,
                                 pre.get("uid"), pre.get("resourceVersion"), bool(dry_run))


# --- the Table form and Accept --------------------------------------------------------------------

INCLUDE_OBJECT = ("Metadata", "None", "Object")


def include_object(query: Query) -> str:
    """TableOptions' `includeObject` (Metadata when absent); 400 as handlers/response.go refuses it."""
    include = query_text(query, "includeObject")
    if include not in ("", *INCLUDE_OBJECT):
        cause = validation.invalid("includeObject", include, "must be 'Metadata', 'Object', 'None', or empty")
        raise errors.bad_request(f"Unable to convert to Table as requested: {cause.field}: {cause.message}")
    return include or "Metadata"


MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
"""What kube-apiserver serializes to (its 406 lists them); custom resources' own objects are JSON or YAML only."""
TABLE = "Table"
_CONVERSIONS = (TABLE, "PartialObjectMetadata", "PartialObjectMetadataList")
_META_VERSIONS = ("v1", "v1beta1")


@dataclass(frozen=True, slots=True)
class _Clause:
    media: str
    params: Mapping[str, str]
    q: float


def _clauses(accept: str) -> list[_Clause]:
    """munnerz/goautoneg's ParseAccept: media ranges with their parameters, highest `q` first."""
    out = []
    for part in accept.split(","):
        media, *params = part.strip().split(";")
        kind, _, sub = media.strip().partition("/")
        if not sub and kind != "*":
            continue
        pairs = dict(p.strip().split("=", 1) for p in params if "=" in p)
        try:
            q = float(pairs.pop("q", "1"))
        except ValueError:
            q = 0.0
        out.append(_Clause(f"{kind.strip()}/{sub.strip() or '*'}", {k.strip(): v.strip() for k, v in pairs.items()}, q))
    return sorted(out, key=lambda c: (-c.q, c.media.startswith("*"), c.media.endswith("*")))


def _accepts(clause: _Clause, media: str, custom: bool) -> str | None:
    """The conversion `clause` asks for ("" for none) if it can be served as `media`, else None."""
    kind, sub = clause.media.split("/")
    if not (clause.media == media or (kind == media.split("/")[0] and sub == "*") or clause.media == "*/*"):
        return None
    if clause.params.get("stream", "watch") != "watch":
        return None
    conversion = clause.params.get("as")
    if conversion is None and not {"g", "v"} & clause.params.keys():
        return None if custom and media == MEDIA_TYPES[2] else ""
    if conversion not in _CONVERSIONS or clause.params.get("g") != "meta.k8s.io" \
            or clause.params.get("v") not in _META_VERSIONS:
        return None
    return None if conversion == TABLE and media == MEDIA_TYPES[2] else conversion


def negotiate(accept: str, custom: bool) -> str:
    """The conversion (`Table`, `PartialObjectMetadata`...) the best acceptable clause of `accept`
    asks for, "" for the object itself; 406 when none is acceptable."""
    if not accept:
        return ""
    for clause in _clauses(accept):
        for media in MEDIA_TYPES:
            conversion = _accepts(clause, media, custom)
            if conversion is not None:
                return conversion
    raise errors.ApiError(406, "NotAcceptable",
                          f"only the following media types are accepted: {', '.join(MEDIA_TYPES)}")
