"""The kubelet's podman runtime (development emulator, not for production): a container as `podman run`.

With `--runtime podman` the kubelet runs each container from its image in local container storage
(`scripts/build-images`) instead of as a local process, with what the pod spec says: command and
args, env (already resolved by `podspec.environment`), the security context (user and group,
runAsNonRoot refused for an image that runs as root, a read-only root, capabilities, no privilege
escalation, seccomp) and volumes (emptyDir, PVC and hostPath as host folders, configMap and secret
as files, a memory-backed emptyDir as tmpfs). The container shares the host's network: it binds
the pod's own loopback address as a process pod does (a redis-server is given `--bind <pod IP>`, as
there), and names Services through the `/etc/hosts` the kubelet's proxy keeps (`proxy.py`). Pure:
the kubelet looks the image up and materialises the volumes this module plans.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from liveplex.emulator.controllers import podspec

PULL_ERROR = "ErrImagePull"
PULL_BACKOFF = "ImagePullBackOff"
RUNTIMES: tuple[str, ...] = ("process", "podman")
_NAME = re.compile(r"[^a-zA-Z0-9_.-]")


@dataclass(frozen=True, slots=True)
class Volume:
    """Where a pod volume lives on the host; `files` are written into it first (configMap, secret)."""

    host: Path | None
    """None: a memory-backed emptyDir (a tmpfs in the container)."""
    read_only: bool = False
    files: Mapping[str, bytes] = field(default_factory=dict)


def container_name(pod: Mapping, container: Mapping) -> str:
    meta = pod["metadata"]
    return _NAME.sub("-", f"lpemu-{meta['namespace']}-{meta['name']}-{container['name']}")


def plan_volumes(pod: Mapping, pod_dir: Path, claims_dir: Path,
                 lookup: podspec.Lookup) -> dict[str, Volume] | podspec.Unrunnable:
    """Each pod volume's host side; a missing ConfigMap or Secret or an unknown type refuses the pod."""
    namespace = pod["metadata"]["namespace"]
    out: dict[str, Volume] = {}
    for v in pod["spec"].get("volumes") or []:
        name = v["name"]
        if "emptyDir" in v:
            memory = (v["emptyDir"] or {}).get("medium") == "Memory"
            out[name] = Volume(None if memory else pod_dir / "volumes" / name)
        elif "persistentVolumeClaim" in v:
            claim = v["persistentVolumeClaim"]
            out[name] = Volume(claims_dir / namespace / claim["claimName"], bool(claim.get("readOnly")))
        elif "hostPath" in v:
            out[name] = Volume(Path(v["hostPath"]["path"]))
        elif "configMap" in v or "secret" in v:
            secret = "secret" in v
            ref = v["secret"] if secret else v["configMap"]
            obj = lookup("secrets" if secret else "configmaps", namespace,
                         ref["secretName"] if secret else ref["name"])
            if obj is None:
                kind, missing = ("secret", ref.get("secretName")) if secret else ("configmap", ref.get("name"))
                return podspec.Unrunnable(podspec.CONFIG_ERROR, f"volume {name!r}: {kind} {missing!r} not found")
            data = {k: base64.b64decode(val) if secret else val.encode()
                    for k, val in (obj.get("data") or {}).items()}
            out[name] = Volume(pod_dir / "volumes" / name, True, data)
        else:
            kind = next((k for k in v if k != "name"), "?")
            return podspec.Unrunnable(podspec.CONFIG_ERROR,
                                      f"volume {name!r}: the emulator cannot mount {kind} volumes")
    return out


def _security(pod: Mapping, container: Mapping, image_user: str) -> list[str] | podspec.Unrunnable:
    pod_ctx, ctx = pod["spec"].get("securityContext") or {}, container.get("securityContext") or {}

    def setting(key: str) -> object:
        return ctx.get(key, pod_ctx.get(key))

    user, group = setting("runAsUser"), setting("runAsGroup")
    image_uid = image_user.split(":", 1)[0] or "0"
    if setting("runAsNonRoot") and (user == 0 or (user is None and image_uid in ("0", "root"))):
        return podspec.Unrunnable(podspec.CONFIG_ERROR, "container has runAsNonRoot and image will run as root")
    flags: list[str] = []
    if user is not None:
        flags += ["--user", f"{user}:{group}" if group is not None else str(user)]
    for gid in [pod_ctx.get("fsGroup"), *pod_ctx.get("supplementalGroups", [])]:
        if gid is not None:
            flags += ["--group-add", str(gid)]
    if ctx.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    caps = ctx.get("capabilities") or {}
    for cap in caps.get("drop", []):
        flags += ["--cap-drop", cap]
    for cap in caps.get("add", []):
        flags += ["--cap-add", cap]
    if ctx.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    if ctx.get("privileged"):
        flags += ["--privileged"]
    seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
    if seccomp == "Unconfined":
        flags += ["--security-opt", "seccomp=unconfined"]
    return flags


def run_argv(pod: Mapping, container: Mapping, env: Mapping[str, str], volumes: Mapping[str, Volume],
             image_user: str, extra_mounts: Mapping[str, str] | None = None,
             termination_log: Path | None = None) -> list[str] | podspec.Unrunnable:
    """`podman run` for `container`; `extra_mounts` (host -> container path) are mounted read-only,
    `termination_log` (a host file) read-write at the container's terminationMessagePath."""
    security = _security(pod, container, image_user)
    if isinstance(security, podspec.Unrunnable):
        return security
    line = ["podman", "run", "--rm", "--name", container_name(pod, container), "--network", "host",
            "--hostname", pod["metadata"]["name"], *security]
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            return podspec.Unrunnable(podspec.CONFIG_ERROR, f"volumeMount {mount['name']!r} names no volume")
        if volume.host is None:
            line += ["--tmpfs", f"{mount['mountPath']}:rw,nosuid,nodev"]
            continue
        source = volume.host / mount["subPath"] if mount.get("subPath") else volume.host
        ro = ":ro" if mount.get("readOnly") or volume.read_only else ""
        line += ["-v", f"{source}:{mount['mountPath']}{ro}"]
    for host, target in (extra_mounts or {}).items():
        line += ["-v", f"{host}:{target}:ro"]
    if termination_log is not None:
        line += ["-v", f"{termination_log}:{container.get('terminationMessagePath') or '/dev/termination-log'}"]
    for key, value in env.items():
        line += ["-e", f"{key}={value}"]
    command = [podspec.expand(c, env) for c in container.get("command") or []]
    args = podspec.redis_args(container["image"], command,
                              [podspec.expand(a, env) for a in container.get("args") or []],
                              pod.get("status", {}).get("podIP", ""))
    if command:
        line += ["--entrypoint", command[0], container["image"], *command[1:], *args]
    else:
        line += [container["image"], *args]
    return line


def pull_refusal(image: str, attempts: int) -> podspec.Unrunnable:
    """What a kubelet reports for an image it cannot get: ErrImagePull first, then the back-off."""
    return podspec.Unrunnable(PULL_ERROR if attempts <= 1 else PULL_BACKOFF,
                              f'Failed to pull image "{image}": not in local container storage (the emulator pulls '
                              f"nothing; build it with scripts/build-images or `podman pull` it)")
