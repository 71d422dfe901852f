"""What the kubelet reads from a pod spec, decided purely: images to local commands, env, `$(VAR)`, probes.

Development emulator, not for production. Pure: objects the env refers to (Secrets, ConfigMaps)
are looked up through a callable. Image mapping: an image whose repository ends in `liveplex` is
the local environment (the `liveplex` command becomes `python -m liveplex.cli`, `python` becomes
this interpreter, anything else runs from PATH); one ending in `redis` runs `redis-server`, with
`--bind <pod IP>` added when its args name no `--bind` (every pod shares the host's network, so a
redis bound to all addresses would collide with the next); any other image cannot run.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from liveplex.emulator.apiserver import builtins

Lookup = Callable[[str, str, str], dict | None]
"""(storage key, namespace, name) -> the object or None."""

NEVER_PULL = "ErrImageNeverPull"
"""The waiting reason of a container whose image the emulator cannot run."""
CONFIG_ERROR = "CreateContainerConfigError"

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined names are replaced, `$$` is a literal `$`, the rest stays."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)
    return _VAR.sub(one, text)


@dataclass(frozen=True, slots=True)
class Unrunnable:
    """A container the emulator will not start: the waiting reason and message it shows."""

    reason: str
    message: str


def repository(image: str) -> str:
    """`ghcr.io/x/liveplex:0.1@sha256:..` -> `ghcr.io/x/liveplex`."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def argv(container: Mapping, pod_ip: str, env: Mapping[str, str], python: str) -> list[str] | Unrunnable:
    """The local command line for `container` (see the module docstring), `$(VAR)` already expanded."""
    image = container.get("image", "")
    repo = repository(image)
    command = [expand(c, env) for c in container.get("command") or []]
    args = [expand(a, env) for a in container.get("args") or []]
    if repo.endswith("liveplex"):
        line = (command or ["liveplex"]) + args
        if line[0] == "liveplex":
            return [python, "-m", "liveplex.cli", *line[1:]]
        if line[0] in ("python", "python3"):
            return [python, *line[1:]]
        return line
    if repo.endswith("redis"):
        return (command or ["redis-server"]) + redis_args(image, command, args, pod_ip)
    return Unrunnable(NEVER_PULL, f'the liveplex emulator cannot run image "{image}": only images whose repository '
                                  "ends in liveplex or redis run, as local processes")


def redis_args(image: str, command: Sequence[str], args: Sequence[str], pod_ip: str) -> list[str]:
    """`args` with `--bind <pod IP>` added for a redis-server that names none: pods share the host's
    network in both runtimes, so a redis bound to every address would take its port from every other pod."""
    line = [*(command or ["redis-server"]), *args]
    if repository(image).endswith("redis") and line[0] == "redis-server" and "--bind" not in line:
        return [*args, "--bind", pod_ip]
    return list(args)


def exec_argv(container: Mapping, command: Sequence[str], python: str) -> list[str]:
    """An exec probe or hook command, mapped like the container's own command."""
    line = list(command)
    if line and repository(container.get("image", "")).endswith("liveplex"):
        if line[0] == "liveplex":
            return [python, "-m", "liveplex.cli", *line[1:]]
        if line[0] in ("python", "python3"):
            return [python, *line[1:]]
    return line


def _field_ref(pod: Mapping, path: str) -> str:
    meta = pod.get("metadata", {})
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    status, spec = pod.get("status", {}), pod.get("spec", {})
    values = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": status.get("podIP"),
              "status.hostIP": status.get("hostIP"),
              "status.podIPs": ",".join(i["ip"] for i in status.get("podIPs") or []),
              "status.hostIPs": ",".join(i["ip"] for i in status.get("hostIPs") or [])}
    return str(values.get(path) or "")


def _key_ref(ref: Mapping, namespace: str, lookup: Lookup, secret: bool) -> str | None:
    obj = lookup("/secrets" if secret else "/configmaps", namespace, ref.get("name", ""))
    data = (obj or {}).get("data") or {}
    if ref.get("key") not in data:
        return None
    value = data[ref["key"]]
    return base64.b64decode(value).decode() if secret else str(value)


def environment(pod: Mapping, container: Mapping, lookup: Lookup) -> dict[str, str] | Unrunnable:
    """The container's env (envFrom, then env in order, each value `$(VAR)`-expanded against the ones before)."""
    ns = pod.get("metadata", {}).get("namespace", "")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        secret = "secretRef" in source
        ref = source.get("secretRef") or source.get("configMapRef") or {}
        obj = lookup("/secrets" if secret else "/configmaps", ns, ref.get("name", ""))
        if obj is None:
            if ref.get("optional"):
                continue
            return Unrunnable(CONFIG_ERROR, f'{"secret" if secret else "configmap"} "{ref.get("name")}" not found')
        for key, value in (obj.get("data") or {}).items():
            env[source.get("prefix", "") + key] = base64.b64decode(value).decode() if secret else str(value)
    for var in container.get("env") or []:
        name, source = var["name"], var.get("valueFrom")
        if source is None:
            env[name] = expand(str(var.get("value", "")), env)
        elif "fieldRef" in source:
            env[name] = _field_ref(pod, source["fieldRef"]["fieldPath"])
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            secret = "secretKeyRef" in source
            ref = source.get("secretKeyRef") or source.get("configMapKeyRef")
            value = _key_ref(ref, ns, lookup, secret)
            if value is None:
                if ref.get("optional"):
                    continue
                return Unrunnable(CONFIG_ERROR, f'couldn\'t find key {ref.get("key")} in '
                                                f'{"Secret" if secret else "ConfigMap"} {ns}/{ref.get("name")}')
            env[name] = value
        elif "resourceFieldRef" in source:
            env[name] = "0"
    return env


@dataclass(frozen=True, slots=True)
class Action:
    """A probe's or hook's action: `http` (host, port, path, headers), `tcp`, `exec` or `sleep`."""

    kind: str
    host: str = ""
    port: int = 0
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Probe:
    action: Action
    initial_delay: float
    period: float
    timeout: float
    success_threshold: int
    failure_threshold: int


def _port(value: object, container: Mapping) -> int:
    if isinstance(value, int):
        return value
    named = next((p for p in container.get("ports") or [] if p.get("name") == value), None)
    return int(named["containerPort"]) if named else int(str(value))


def action(handler: Mapping, container: Mapping, pod_ip: str) -> Action | None:
    """A probe's or lifecycle hook's handler; None for kinds the emulator does not run (grpc)."""
    if "httpGet" in handler:
        h = handler["httpGet"]
        return Action("http", h.get("host") or pod_ip, _port(h.get("port"), container), h.get("path") or "/",
                      tuple((x["name"], x["value"]) for x in h.get("httpHeaders") or []))
    if "tcpSocket" in handler:
        t = handler["tcpSocket"]
        return Action("tcp", t.get("host") or pod_ip, _port(t.get("port"), container))
    if "exec" in handler:
        return Action("exec", command=tuple(handler["exec"].get("command") or ()))
    if "sleep" in handler:
        return Action("sleep", seconds=float(handler["sleep"].get("seconds", 0)))
    return None


def probe(spec: Mapping | None, container: Mapping, pod_ip: str) -> Probe | None:
    if not spec:
        return None
    act = action(spec, container, pod_ip)
    if act is None:
        return None
    d = builtins.PROBE_DEFAULTS
    return Probe(act, float(spec.get("initialDelaySeconds", 0)), float(spec.get("periodSeconds", d["periodSeconds"])),
                 float(spec.get("timeoutSeconds", d["timeoutSeconds"])),
                 int(spec.get("successThreshold", d["successThreshold"])),
                 int(spec.get("failureThreshold", d["failureThreshold"])))


KUBELET_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
"""The pod conditions the kubelet owns; any other type (a readiness gate's) belongs to whoever wrote it."""


def ready_condition(pod: Mapping, unready: Sequence[str]) -> tuple[bool, str, str]:
    """(Ready, reason, message) as the kubelet computes it: every container ready (`unready` names
    those that are not), then every `readinessGates` condition in `status.conditions` True."""
    if unready:
        return False, "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
    conditions = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or []}
    problems = []
    for gate in pod.get("spec", {}).get("readinessGates") or []:
        kind = gate.get("conditionType", "")
        found = conditions.get(kind)
        if found is None:
            problems.append(f'corresponding condition of pod readiness gate "{kind}" does not exist.')
        elif found.get("status") != "True":
            problems.append(f'the status of pod readiness gate "{kind}" is not "True", but {found.get("status")}')
    if problems:
        return False, "ReadinessGatesNotReady", ", ".join(problems)
    return True, "", ""


TERMINATION_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES = 80, 2048
"""What `FallbackToLogsOnError` takes of the log, as the kubelet does."""


def termination_message(container: Mapping, exit_code: int, written: str, log: str) -> str:
    """A terminated container's `message`: what it wrote to its terminationMessagePath (first 4096
    bytes), else, for a failure under `FallbackToLogsOnError`, the tail of its log."""
    if written:
        return written.encode()[:TERMINATION_MESSAGE_BYTES].decode(errors="ignore")
    if exit_code == 0 or container.get("terminationMessagePolicy") != "FallbackToLogsOnError":
        return ""
    tail = "".join(log.splitlines(keepends=True)[-FALLBACK_LOG_LINES:]).encode()
    return tail[-FALLBACK_LOG_BYTES:].decode(errors="ignore")
