"""kube-apiserver's Go validation of built-in objects, for the fields liveplex's objects touch.

Development emulator, not for production. Pure: each function takes plain dicts and returns the
causes a real server would put in its 422, with the same field paths and, as far as practical,
the same words (upstream's `k8s.io/apimachinery/pkg/util/validation` and
`pkg/apis/core/validation`, v1.32). The published schemas (`openapi.py`) cover field names, JSON
types and required fields; this module covers what they cannot say: names, label and annotation
keys and values, ports, quantities, tolerations, affinity terms, security contexts, env var names,
enumerations, selectors, and the fields an update may not change. Kinds and fields not listed
here are not checked beyond the schema.

`check(key, obj)` runs on every write of a defaulted object; `check_update(key, old, new)` adds the
immutability rules on updates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from liveplex.emulator.apiserver import deep, quantity, selectors
from liveplex.emulator.apiserver.errors import Cause

Obj = Mapping[str, Any]

# --- field error constructors (field.Invalid, field.Required, ... in upstream's words) -------------


def _shown(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return deep.dumps(value, sort_keys=True).decode()


def invalid(path: str, value: object, detail: str) -> Cause:
    return Cause(path, f"Invalid value: {_shown(value)}: {detail}", "FieldValueInvalid")


def required(path: str, detail: str = "") -> Cause:
    return Cause(path, f"Required value: {detail}" if detail else "Required value", "FieldValueRequired")


def unsupported(path: str, value: object, supported: Iterable[str]) -> Cause:
    listed = ", ".join(json.dumps(s) for s in supported)
    return Cause(path, f"Unsupported value: {_shown(value)}: supported values: {listed}", "FieldValueNotSupported")


def duplicate(path: str, value: object) -> Cause:
    return Cause(path, f"Duplicate value: {_shown(value)}", "FieldValueDuplicate")


def not_found(path: str, value: object) -> Cause:
    return Cause(path, f"Not found: {_shown(value)}", "FieldValueNotFound")


def forbidden(path: str, detail: str) -> Cause:
    return Cause(path, f"Forbidden: {detail}", "FieldValueForbidden")


def too_long(path: str, limit: int) -> Cause:
    return Cause(path, f"Too long: must have at most {limit} bytes", "FieldValueTooLong")


IMMUTABLE = "field is immutable"

# --- the string formats (k8s.io/apimachinery/pkg/util/validation) ---------------------------------


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {listed}regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = f"({_QUALIFIED})?"
_CONFIG_KEY = "[-._a-zA-Z0-9]+"
_QUALIFIED_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def _formatted(value: str, limit: int, fmt: str, message: str, *examples: str) -> list[str]:
    out = [_max_len(limit)] if len(value) > limit else []
    return out + ([] if _full(fmt, value) else [_regex_error(message, fmt, *examples)])


def dns1123_label(value: str) -> list[str]:
    return _formatted(value, 63, _DNS1123_LABEL, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character", "my-name", "123-abc")


def dns1123_subdomain(value: str) -> list[str]:
    return _formatted(value, 253, _DNS1123_SUBDOMAIN, "a lowercase RFC 1123 subdomain must consist of lower case "
                      "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                      "example.com")


def dns1035_label(value: str) -> list[str]:
    return _formatted(value, 63, _DNS1035_LABEL, "a DNS-1035 label must consist of lower case alphanumeric characters "
                      "or '-', start with an alphabetic character, and end with an alphanumeric character", "my-name",
                      "abc-123")


def path_segment(value: str) -> list[str]:
    """RBAC objects' names: anything that can be one URL path segment."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(_QUALIFIED_MSG, _QUALIFIED, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    out: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        out += ["prefix part must be non-empty"] if not prefix else [
            f"prefix part {m}" for m in dns1123_subdomain(prefix)]
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > 63:
        out.append(f"name part {_max_len(63)}")
    if not _full(_QUALIFIED, name):
        out.append("name part " + _regex_error(_QUALIFIED_MSG, _QUALIFIED, "MyName", "my.name", "123-abc"))
    return out


def label_value(value: str) -> list[str]:
    return _formatted(value, 63, _LABEL_VALUE, "a valid label must be an empty string or consist of alphanumeric "
                      "characters, '-', '_' or '.', and must start and end with an alphanumeric character", "MyValue",
                      "my_value", "12345")


def port_name(value: str) -> list[str]:
    """IANA_SVC_NAME: a named container or Service target port."""
    out = [_max_len(15)] if len(value) > 15 else []
    if not _full("[-a-z0-9]+", value):
        out.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        out.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        out.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        out.append("must not begin or end with a hyphen")
    return out


def env_var_name(value: str) -> list[str]:
    """v1.32 (RelaxedEnvironmentVariableValidation, beta, on): printable ASCII but '='."""
    if not value or not all(" " <= c <= "~" for c in value) or "=" in value:
        return ["a valid environment variable name must consist only of printable ASCII characters other than '='"]
    return []


def config_key(value: str) -> list[str]:
    out = [_max_len(253)] if len(value) > 253 else []
    if not _full(_CONFIG_KEY, value):
        out.append(_regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                _CONFIG_KEY, "key.name", "KEY_NAME", "key-name"))
    if value in (".", "..") or value.startswith(".."):
        out.append("must not be '.' or '..'" if value in (".", "..") else "must not start with '..'")
    return out


def _each(path: str, value: str, check: Callable[[str], list[str]]) -> list[Cause]:
    return [invalid(path, value, m) for m in check(value)]


def _port_number(path: str, port: object) -> list[Cause]:
    if not isinstance(port, int) or not 1 <= port <= 65535:
        return [invalid(path, port, "must be between 1 and 65535, inclusive")]
    return []


def _port_num_or_name(path: str, port: object) -> list[Cause]:
    if isinstance(port, str):
        return _each(path, port, port_name)
    return _port_number(path, port)


# --- metadata -------------------------------------------------------------------------------------

NAME_RULES: dict[str, Callable[[str], list[str]]] = {
    "/namespaces": dns1123_label,
    "/services": dns1035_label,
    "rbac.authorization.k8s.io/roles": path_segment,
    "rbac.authorization.k8s.io/rolebindings": path_segment,
    "rbac.authorization.k8s.io/clusterroles": path_segment,
    "rbac.authorization.k8s.io/clusterrolebindings": path_segment,
}
"""How each kind's `metadata.name` is checked; every other kind wants a DNS-1123 subdomain."""

ANNOTATIONS_LIMIT = 256 * 1024


def labels(path: str, values: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    for key, value in (values or {}).items():
        out += _each(path, key, qualified_name)
        out += _each(path, value, label_value) if isinstance(value, str) else []
    return out


def annotation_map(path: str, values: Obj | None) -> list[Cause]:
    out: list[Cause] = []
    size = 0
    for key, value in (values or {}).items():
        out += [invalid(path, key, m) for m in qualified_name(key.lower())]
        size += len(key) + len(value or "")
    if size > ANNOTATIONS_LIMIT:
        out.append(too_long(path, ANNOTATIONS_LIMIT))
    return out


def name(key: str, value: str, path: str = "metadata.name") -> list[Cause]:
    if not value:
        return [required(path, "name or generateName is required")]
    return _each(path, value, NAME_RULES.get(key, dns1123_subdomain))


def object_meta(key: str, meta: Obj, path: str = "metadata") -> list[Cause]:
    return (name(key, meta.get("name") or "", f"{path}.name") + labels(f"{path}.labels", meta.get("labels"))
            + annotation_map(f"{path}.annotations", meta.get("annotations")))


def label_selector(path: str, selector: Obj | None) -> list[Cause]:
    if not selector:
        return []
    out = labels(f"{path}.matchLabels", selector.get("matchLabels"))
    for n, req in enumerate(selector.get("matchExpressions") or []):
        here = f"{path}.matchExpressions[{n}]"
        op, values = req.get("operator"), req.get("values") or []
        if op in ("In", "NotIn") and not values:
            out.append(required(f"{here}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            out.append(forbidden(f"{here}.values", "may not be specified when `operator` is 'Exists' or "
                                                   "'DoesNotExist'"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(invalid(f"{here}.operator", op, "not a valid selector operator"))
        out += _each(f"{here}.key", req.get("key") or "", qualified_name)
        out += [c for n2, v in enumerate(values) for c in _each(f"{here}.values[{n2}]", v, label_value)]
    return out


# --- pods -----------------------------------------------------------------------------------------

_STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def _resource_name(path: str, resource: str) -> list[Cause]:
    if resource in _STANDARD_RESOURCES or resource.startswith("hugepages-"):
        return []
    if "/" not in resource:
        return [invalid(path, resource, "must be a standard resource type or fully qualified")]
    out = _each(path, resource, qualified_name)
    if resource.split("/")[0].endswith("kubernetes.io"):
        out.append(invalid(path, resource, "must be a standard resource for containers"))
    return out


def _extended(resource: str) -> bool:
    return "/" in resource and not resource.split("/")[0].endswith("kubernetes.io")


def resources(path: str, spec: Obj | None) -> list[Cause]:
    """ValidateResourceRequirements: names, non-negative values, requests within limits."""
    spec = spec or {}
    limits = spec.get("limits") or {}
    requests = spec.get("requests") or {}
    out: list[Cause] = []
    parsed: dict[tuple[str, str], Decimal] = {}
    for part, values in (("limits", limits), ("requests", requests)):
        for resource, raw in values.items():
            here = f"{path}.{part}[{resource}]"
            out += _resource_name(here, resource)
            value = quantity.parse(raw)
            if value is None:
                continue  # the decoder refused it already
            parsed[part, resource] = value
            if value < 0:
                out.append(invalid(here, str(raw), "must be greater than or equal to 0"))
            elif _extended(resource) and value != value.to_integral_value():
                out.append(invalid(here, str(raw), "must be an integer"))
    for resource, raw in requests.items():
        here = f"{path}.requests[{resource}]"
        request, limit = parsed.get(("requests", resource)), parsed.get(("limits", resource))
        if request is None:
            continue
        if _extended(resource):
            if limit is None:
                out.append(required(f"{path}.limits", "Limit must be set for non overcommitable resources"))
            elif request != limit:
                out.append(invalid(here, str(raw), f"must be equal to {resource} limit of {limits[resource]}"))
        elif limit is not None and request > limit:
            out.append(invalid(here, str(raw), f"must be less than or equal to {resource} limit of "
                                               f"{limits[resource]}"))
    return out


def _handler(path: str, handler: Obj, kinds: tuple[str, ...]) -> list[Cause]:
    present = [k for k in kinds if handler.get(k) is not None]
    if not present:
        return [required(path, "must specify a handler type")]
    if len(present) > 1:
        return [forbidden(f"{path}.{present[1]}", "may not specify more than 1 handler type")]
    kind = present[0]
    inner = handler[kind]
    if kind in ("httpGet", "tcpSocket"):
        return _port_num_or_name(f"{path}.{kind}.port", inner.get("port"))
    if kind == "grpc":
        return _port_number(f"{path}.grpc.port", inner.get("port"))
    return []


def _probe(path: str, probe: Obj | None, single_success: bool) -> list[Cause]:
    if probe is None:
        return []
    out = _handler(path, probe, _HANDLERS)
    for field in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        value = probe.get(field)
        if isinstance(value, int) and value < 0:
            out.append(invalid(f"{path}.{field}", value, "must be greater than or equal to 0"))
    if single_success and probe.get("successThreshold", 1) != 1:
        out.append(invalid(f"{path}.successThreshold", probe["successThreshold"], "must be 1"))
    return out


def _env(path: str, env: list[Obj]) -> list[Cause]:
    out: list[Cause] = []
    for n, var in enumerate(env):
        here = f"{path}[{n}]"
        var_name = var.get("name") or ""
        out += [required(f"{here}.name")] if not var_name else _each(f"{here}.name", var_name, env_var_name)
        source = var.get("valueFrom")
        if source is not None:
            refs = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
                    if source.get(k) is not None]
            if var.get("value"):
                out.append(invalid(f"{here}.valueFrom", "", "may not be specified when `value` is not empty"))
            if len(refs) != 1:
                out.append(invalid(f"{here}.valueFrom", "", "must specify one of: `fieldRef`, "
                                   "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`" if not refs else
                                   "may not have more than one field specified at a time"))
            for ref in ("configMapKeyRef", "secretKeyRef"):
                key = (source.get(ref) or {}).get("key")
                if source.get(ref) is not None:
                    out += [required(f"{here}.valueFrom.{ref}.key")] if not key else _each(
                        f"{here}.valueFrom.{ref}.key", key, config_key)
    return out


_IDS = ("runAsUser", "runAsGroup", "fsGroup")
_PROFILE_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")


def _profile(path: str, profile: Obj | None) -> list[Cause]:
    """A seccomp or AppArmor profile: `localhostProfile` exactly when the type is Localhost."""
    if not profile:
        return []
    kind = profile.get("type")
    if kind not in _PROFILE_TYPES:
        return [unsupported(f"{path}.type", kind or "", _PROFILE_TYPES)]
    if kind == "Localhost" and not profile.get("localhostProfile"):
        return [required(f"{path}.localhostProfile", "must be set when seccomp type is Localhost")]
    if kind != "Localhost" and profile.get("localhostProfile"):
        return [invalid(f"{path}.localhostProfile", profile["localhostProfile"],
                        "can only be set when seccomp type is Localhost")]
    return []


def security_context(path: str, context: Obj | None) -> list[Cause]:
    """Pod and container security contexts: ids in range, profiles, privilege escalation."""
    context = context or {}
    out: list[Cause] = []
    for field in _IDS:
        value = context.get(field)
        if isinstance(value, int) and not 0 <= value <= 2147483647:
            out.append(invalid(f"{path}.{field}", value, "must be between 0 and 2147483647, inclusive"))
    out += _profile(f"{path}.seccompProfile", context.get("seccompProfile"))
    out += _profile(f"{path}.appArmorProfile", context.get("appArmorProfile"))
    capabilities = context.get("capabilities") or {}
    if context.get("allowPrivilegeEscalation") is False and (
            context.get("privileged") or "CAP_SYS_ADMIN" in (capabilities.get("add") or ())
            or "SYS_ADMIN" in (capabilities.get("add") or ())):
        out.append(invalid(f"{path}", context.get("allowPrivilegeEscalation"), "cannot set "
                           "`allowPrivilegeEscalation` to false and `privileged` to true" if context.get("privileged")
                           else "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
    procmount = context.get("procMount")
    if procmount is not None and procmount not in ("Default", "Unmasked"):
        out.append(unsupported(f"{path}.procMount", procmount, ("Default", "Unmasked")))
    return out


def _container(path: str, container: Obj, volumes: set[str]) -> list[Cause]:
    out: list[Cause] = []
    if not container.get("image"):
        out.append(required(f"{path}.image"))
    policy = container.get("imagePullPolicy")
    if policy is not None and policy not in _PULL_POLICIES:
        out.append(unsupported(f"{path}.imagePullPolicy", policy, _PULL_POLICIES))
    seen_ports: set[str] = set()
    for n, port in enumerate(container.get("ports") or []):
        here = f"{path}.ports[{n}]"
        if port.get("name"):
            out += _each(f"{here}.name", port["name"], port_name)
            out += [duplicate(f"{here}.name", port["name"])] if port["name"] in seen_ports else []
            seen_ports.add(port["name"])
        out += _port_number(f"{here}.containerPort", port.get("containerPort"))
        if port.get("hostPort"):
            out += _port_number(f"{here}.hostPort", port["hostPort"])
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            out.append(unsupported(f"{here}.protocol", port["protocol"], _PROTOCOLS))
    out += _env(f"{path}.env", container.get("env") or [])
    out += security_context(f"{path}.securityContext", container.get("securityContext"))
    out += resources(f"{path}.resources", container.get("resources"))
    out += _probe(f"{path}.readinessProbe", container.get("readinessProbe"), False)
    out += _probe(f"{path}.livenessProbe", container.get("livenessProbe"), True)
    out += _probe(f"{path}.startupProbe", container.get("startupProbe"), True)
    for hook in ("postStart", "preStop"):
        handler = (container.get("lifecycle") or {}).get(hook)
        if handler is not None:
            out += _handler(f"{path}.lifecycle.{hook}", handler, _LIFECYCLE_HANDLERS)
    mounts: set[str] = set()
    for n, mount in enumerate(container.get("volumeMounts") or []):
        here = f"{path}.volumeMounts[{n}]"
        if mount.get("name") not in volumes:
            out.append(not_found(f"{here}.name", mount.get("name") or ""))
        mount_path = mount.get("mountPath") or ""
        if not mount_path:
            out.append(required(f"{here}.mountPath"))
        elif mount_path in mounts:
            out.append(invalid(f"{here}.mountPath", mount_path, "must be unique"))
        mounts.add(mount_path)
    return out


def _volumes(path: str, volumes: list[Obj]) -> tuple[list[Cause], set[str]]:
    out: list[Cause] = []
    seen: set[str] = set()
    for n, volume in enumerate(volumes):
        here = f"{path}[{n}]"
        volume_name = volume.get("name") or ""
        out += [required(f"{here}.name")] if not volume_name else _each(f"{here}.name", volume_name, dns1123_label)
        if volume_name in seen:
            out.append(duplicate(f"{here}.name", volume_name))
        seen.add(volume_name)
        sources = [k for k in volume if k != "name" and volume[k] is not None]
        if not sources:
            out.append(required(here, "must specify a volume type"))
        elif len(sources) > 1:
            out.append(forbidden(f"{here}.{sources[1]}", "may not specify more than 1 volume type"))
        if "hostPath" in sources and not volume["hostPath"].get("path"):
            out.append(required(f"{here}.hostPath.path"))
        if "persistentVolumeClaim" in sources and not volume["persistentVolumeClaim"].get("claimName"):
            out.append(required(f"{here}.persistentVolumeClaim.claimName"))
    return out, seen


def toleration(path: str, t: Obj) -> list[Cause]:
    out: list[Cause] = []
    key, op, value, effect = t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect")
    if key:
        out += _each(f"{path}.key", key, qualified_name)
    elif op != "Exists":
        out.append(invalid(f"{path}.operator", op, 'operator must be Exists when `key` is empty, which means "match '
                                                   'all values and all keys"'))
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        out.append(invalid(f"{path}.effect", effect or "", "effect must be 'NoExecute' when `tolerationSeconds` is "
                                                           "set"))
    if op == "Equal":
        out += _each(f"{path}.value", value, label_value)
    elif op == "Exists":
        if value:
            out.append(invalid(f"{path}.operator", value, "value must be empty when `operator` is 'Exists'"))
    else:
        out.append(unsupported(f"{path}.operator", op, ("Equal", "Exists")))
    if effect and effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        out.append(unsupported(f"{path}.effect", effect, ("NoExecute", "NoSchedule", "PreferNoSchedule")))
    return out


_NODE_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def _node_requirement(path: str, req: Obj) -> list[Cause]:
    op, values = req.get("operator"), req.get("values") or []
    out = _each(f"{path}.key", req.get("key") or "", qualified_name)
    if op in ("In", "NotIn") and not values:
        out.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist") and values:
        out.append(forbidden(f"{path}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt") and (len(values) != 1 or not str(values[0]).lstrip("-").isdigit()):
        out.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    elif op not in _NODE_OPERATORS:
        out.append(unsupported(f"{path}.operator", op, _NODE_OPERATORS))
    return out


def _node_term(path: str, term: Obj) -> list[Cause]:
    out: list[Cause] = []
    for n, req in enumerate(term.get("matchExpressions") or []):
        out += _node_requirement(f"{path}.matchExpressions[{n}]", req)
    return out


def _pod_terms(path: str, terms: list[Obj], weighted: bool) -> list[Cause]:
    out: list[Cause] = []
    for n, entry in enumerate(terms):
        here = f"{path}[{n}]"
        term = entry.get("podAffinityTerm") or {} if weighted else entry
        where = f"{here}.podAffinityTerm" if weighted else here
        if weighted and not 1 <= int(entry.get("weight") or 0) <= 100:
            out.append(invalid(f"{here}.weight", entry.get("weight"), "must be in the range 1-100"))
        key = term.get("topologyKey") or ""
        out += [required(f"{where}.topologyKey", "can not be empty")] if not key else _each(
            f"{where}.topologyKey", key, qualified_name)
        out += label_selector(f"{where}.labelSelector", term.get("labelSelector"))
    return out


def affinity(path: str, value: Obj | None) -> list[Cause]:
    """Node affinity terms and pod (anti-)affinity terms: operators, values, keys, topology keys."""
    value = value or {}
    out: list[Cause] = []
    node = value.get("nodeAffinity") or {}
    hard = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if hard is not None:
        terms = hard.get("nodeSelectorTerms") or []
        here = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        out += [required(here, "must have at least one node selector term")] if not terms else [
            c for n, t in enumerate(terms) for c in _node_term(f"{here}[{n}]", t)]
    for n, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        here = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{n}]"
        if not 1 <= int(pref.get("weight") or 0) <= 100:
            out.append(invalid(f"{here}.weight", pref.get("weight"), "must be in the range 1-100"))
        out += _node_term(f"{here}.preference", pref.get("preference") or {})
    for kind in ("podAffinity", "podAntiAffinity"):
        block = value.get(kind) or {}
        out += _pod_terms(f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution",
                          block.get("requiredDuringSchedulingIgnoredDuringExecution") or [], False)
        out += _pod_terms(f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution",
                          block.get("preferredDuringSchedulingIgnoredDuringExecution") or [], True)
    return out


def pod_spec(path: str, spec: Obj, restart_policies: tuple[str, ...] = ("Always", "OnFailure", "Never")) -> list[Cause]:
    out, volume_names = _volumes(f"{path}.volumes", spec.get("volumes") or [])
    containers = spec.get("containers") or []
    if not containers:
        out.append(required(f"{path}.containers"))
    seen: set[str] = set()
    for group in ("initContainers", "containers"):
        for n, container in enumerate(spec.get(group) or []):
            here = f"{path}.{group}[{n}]"
            cname = container.get("name") or ""
            out += [required(f"{here}.name")] if not cname else _each(f"{here}.name", cname, dns1123_label)
            out += [duplicate(f"{here}.name", cname)] if cname and cname in seen else []
            seen.add(cname)
            out += _container(here, container, volume_names)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in restart_policies:
        out.append(unsupported(f"{path}.restartPolicy", policy, restart_policies))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"):
        out.append(unsupported(f"{path}.dnsPolicy", dns, ("ClusterFirst", "ClusterFirstWithHostNet", "Default",
                                                          "None")))
    out += labels(f"{path}.nodeSelector", spec.get("nodeSelector"))
    out += affinity(f"{path}.affinity", spec.get("affinity"))
    out += security_context(f"{path}.securityContext", spec.get("securityContext"))
    for n, t in enumerate(spec.get("tolerations") or []):
        out += toleration(f"{path}.tolerations[{n}]", t)
    for field in ("serviceAccountName", "priorityClassName"):
        if spec.get(field):
            out += _each(f"{path}.{field}", spec[field], dns1123_subdomain)
    for n, gate in enumerate(spec.get("readinessGates") or []):
        out += _each(f"{path}.readinessGates[{n}].conditionType", gate.get("conditionType") or "", qualified_name)
    grace = spec.get("terminationGracePeriodSeconds")
    if isinstance(grace, int) and grace < 0:
        out.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"))
    return out


# --- workloads, services, the rest ----------------------------------------------------------------

_WORKLOADS = ("apps/deployments", "apps/replicasets", "apps/statefulsets", "apps/daemonsets")


def _int_or_percent(path: str, value: object) -> tuple[list[Cause], float | None]:
    """A non-negative int or `N%`; the value as a fraction for percents, as is for ints."""
    if isinstance(value, str):
        found = re.fullmatch(r"([0-9]+)%", value)
        if found is None:
            return [invalid(path, value, "a valid percent string must be a numeric string followed by an ending "
                                         "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")], None
        return [], int(found.group(1)) / 100
    if isinstance(value, int) and value < 0:
        return [invalid(path, value, "must be greater than or equal to 0")], None
    return [], value if isinstance(value, int) else None


def workload(key: str, spec: Obj) -> list[Cause]:
    out: list[Cause] = []
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        out.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    selector = spec.get("selector")
    template = spec.get("template") or {}
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    if not selector:
        out.append(required("spec.selector"))
    else:
        out += label_selector("spec.selector", selector)
        parsed = selectors.from_label_selector(selector)
        if not parsed:
            out.append(invalid("spec.selector", selector, f"empty selector is invalid for {key.split('/')[1][:-1]}"))
        elif not selectors.matches_labels(parsed, {"metadata": {"labels": template_labels}}):
            out.append(invalid("spec.template.metadata.labels", template_labels,
                               "`selector` does not match template `labels`"))
    out += labels("spec.template.metadata.labels", template_labels)
    out += annotation_map("spec.template.metadata.annotations", (template.get("metadata") or {}).get("annotations"))
    out += pod_spec("spec.template.spec", template.get("spec") or {}, ("Always",))
    if key == "apps/deployments":
        out += _strategy(spec.get("strategy") or {})
        deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds", 0)
        if isinstance(deadline, int) and isinstance(ready, int) and deadline <= ready:
            out.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    history = spec.get("revisionHistoryLimit")
    if isinstance(history, int) and history < 0:
        out.append(invalid("spec.revisionHistoryLimit", history, "must be greater than or equal to 0"))
    return out


def _strategy(strategy: Obj) -> list[Cause]:
    kind = strategy.get("type", "RollingUpdate")
    if kind not in ("Recreate", "RollingUpdate"):
        return [unsupported("spec.strategy.type", kind, ("Recreate", "RollingUpdate"))]
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        return [forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is "
                                                         "'Recreate'")] if rolling else []
    rolling = rolling or {}
    path = "spec.strategy.rollingUpdate"
    out, surge = _int_or_percent(f"{path}.maxSurge", rolling.get("maxSurge", "25%"))
    more, unavailable = _int_or_percent(f"{path}.maxUnavailable", rolling.get("maxUnavailable", "25%"))
    out += more
    if surge == 0 and unavailable == 0:
        out.append(invalid(f"{path}.maxUnavailable", rolling.get("maxUnavailable"), "may not be 0 when `maxSurge` "
                                                                                     "is 0"))
    if isinstance(rolling.get("maxUnavailable"), str) and unavailable is not None and unavailable > 1:
        out.append(invalid(f"{path}.maxUnavailable", rolling["maxUnavailable"], "must not be greater than 100%"))
    return out


SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def service(spec: Obj) -> list[Cause]:
    out: list[Cause] = []
    kind = spec.get("type", "ClusterIP")
    if kind not in SERVICE_TYPES:
        out.append(unsupported("spec.type", kind, SERVICE_TYPES))
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and kind != "ExternalName" and not headless:
        out.append(required("spec.ports"))
    if headless and kind not in ("ClusterIP", "ExternalName"):
        out.append(invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {kind} services"))
    names: set[str] = set()
    for n, port in enumerate(ports):
        here = f"spec.ports[{n}]"
        port_label = port.get("name") or ""
        if len(ports) > 1 and not port_label:
            out.append(required(f"{here}.name"))
        if port_label:
            out += _each(f"{here}.name", port_label, dns1123_label)
            out += [duplicate(f"{here}.name", port_label)] if port_label in names else []
            names.add(port_label)
        out += _port_number(f"{here}.port", port.get("port"))
        if port.get("protocol", "TCP") not in _PROTOCOLS:
            out.append(unsupported(f"{here}.protocol", port["protocol"], _PROTOCOLS))
        target = port.get("targetPort")
        if target is not None and target != 0:
            out += _port_num_or_name(f"{here}.targetPort", target)
        if port.get("nodePort") and kind not in ("NodePort", "LoadBalancer"):
            out.append(forbidden(f"{here}.nodePort", "may not be used when `type` is 'ClusterIP'"))
    out += labels("spec.selector", spec.get("selector"))
    affinity = spec.get("sessionAffinity", "None")
    if affinity not in ("ClientIP", "None"):
        out.append(unsupported("spec.sessionAffinity", affinity, ("ClientIP", "None")))
    return out


def disruption_budget(spec: Obj) -> list[Cause]:
    out = label_selector("spec.selector", spec.get("selector"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        out.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            errs, fraction = _int_or_percent(f"spec.{field}", spec[field])
            out += errs
            if isinstance(spec[field], str) and fraction is not None and fraction > 1:
                out.append(invalid(f"spec.{field}", spec[field], "must not be greater than 100%"))
    return out


def autoscaler(spec: Obj) -> list[Cause]:
    out: list[Cause] = []
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if isinstance(low, int) and low < 1:
        out.append(invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if isinstance(high, int):
        if high < 1:
            out.append(invalid("spec.maxReplicas", high, "must be greater than 0"))
        elif isinstance(low, int) and high < low:
            out.append(invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    target = spec.get("scaleTargetRef") or {}
    for field in ("kind", "name"):
        if not target.get(field):
            out.append(required(f"spec.scaleTargetRef.{field}"))
    return out


MAX_DATA_BYTES = 1024 * 1024
"""core.MaxSecretSize: the most a ConfigMap's or a Secret's values may hold together."""


def _data_keys(obj: Obj) -> list[Cause]:
    """Keys (config keys) and total size (ValidateConfigMap, ValidateSecret)."""
    out: list[Cause] = []
    size = 0
    for field in ("data", "binaryData", "stringData"):
        for key, value in (obj.get(field) or {}).items():
            out += _each(f"{field}[{key}]", key, config_key)
            encoded = field == "binaryData" or (field == "data" and obj.get("kind") == "Secret")
            size += len(value or "") * 3 // 4 if encoded else len((value or "").encode())
    if size > MAX_DATA_BYTES:
        out.append(too_long("", MAX_DATA_BYTES))
    return out


_SPEC_RULES: dict[str, Callable[[Obj], list[Cause]]] = {
    "/services": service,
    "policy/poddisruptionbudgets": disruption_budget,
    "autoscaling/horizontalpodautoscalers": autoscaler,
}


def check(key: str, obj: Obj) -> list[Cause]:
    """Every cause the rules above find in a defaulted object of storage key `key`."""
    out = object_meta(key, obj.get("metadata") or {})
    spec = obj.get("spec") or {}
    if key == "/pods":
        out += pod_spec("spec", spec)
    elif key in _WORKLOADS:
        out += workload(key, spec)
    elif key in _SPEC_RULES:
        out += _SPEC_RULES[key](spec)
    elif key in ("/configmaps", "/secrets"):
        out += _data_keys(obj)
    return out


# --- updates --------------------------------------------------------------------------------------

_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")
POD_UPDATE = ("pod updates may not change fields other than `spec.containers[*].image`,"
              "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
              "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
              "previously negative)")


def _without_mutable_pod_fields(spec: Obj) -> dict:
    out = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for group in ("containers", "initContainers"):
        if group in out:
            out[group] = [{k: v for k, v in c.items() if k != "image"} for c in out[group]]
    return out


def _pod_update(old: Obj, new: Obj) -> list[Cause]:
    before, after = old.get("spec") or {}, new.get("spec") or {}
    # Binding sets nodeName once (the emulator binds with a patch instead of pods/binding).
    if not before.get("nodeName"):
        after = {k: v for k, v in after.items() if k != "nodeName"}
        before = {k: v for k, v in before.items() if k != "nodeName"}
    if _without_mutable_pod_fields(before) != _without_mutable_pod_fields(after):
        return [forbidden("spec", POD_UPDATE)]
    kept = [t for t in before.get("tolerations") or [] if t not in (after.get("tolerations") or [])]
    return [forbidden("spec.tolerations", POD_UPDATE)] if kept else []


def check_update(key: str, old: Obj, new: Obj) -> list[Cause]:
    """The fields an update may not change (the object as a whole is checked by `check`)."""
    spec_before, spec_after = old.get("spec") or {}, new.get("spec") or {}
    if key == "/pods":
        return _pod_update(old, new)
    if key in _WORKLOADS and spec_before.get("selector") != spec_after.get("selector"):
        return [invalid("spec.selector", spec_after.get("selector"), IMMUTABLE)]
    if key == "/services" and spec_before.get("clusterIP") and spec_before.get("clusterIP") != spec_after.get(
            "clusterIP") and spec_before.get("type") != "ExternalName" and spec_after.get("type") != "ExternalName":
        return [invalid("spec.clusterIPs[0]", spec_after.get("clusterIP"), "may not change once set")]
    if key == "apps/statefulsets":
        changed = [f for f in spec_after.keys() | spec_before.keys() if f not in (
            "replicas", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds",
            "ordinals") and spec_before.get(f) != spec_after.get(f)]
        if changed:
            return [forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                      "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                                      "'minReadySeconds' are forbidden")]
    return []
