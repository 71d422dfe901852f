"""What `liveplex up --kube` needs of the emulator's API server: the LiveEngine CRD installed and
served, and the user's kubeconfig as the platform's ready signal.

The emulator writes its own kubeconfig beside its state (the operator's, from the start); only
once the CRD is established, its schema served (what `kubectl apply` validates against) and every
child listens is it copied, whole, to `--kubeconfig` (`publish`), and `up` removes it when the
platform stops. `liveplex up --kube --wait` waits for that file to name a server that serves the
CRD (`wait`), so a script's next `kubectl apply` cannot race the install. Both live under
`$XDG_STATE_HOME/liveplex` by default (`state_home`): never in the checkout.
"""

from __future__ import annotations

import base64
import importlib
import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from liveplex import cli
from liveplex.operator import names

EXTRAS = ("operator", "emulator")
"""What `--kube` runs on: the emulator's (TLS, CEL, the schemas), the operator's (kopf, the client), YAML."""
CRD_NAME = f"{names.PLURAL}.{names.GROUP}"
EMULATOR_KUBECONFIG = "admin.kubeconfig"
"""The emulator's own kubeconfig, in its state dir: the operator's from the start."""


def state_home(environ: Mapping[str, str]) -> Path:
    """`$XDG_STATE_HOME/liveplex` (`~/.local/state/liveplex` without it): where `up --kube` keeps
    the kubeconfig and the emulator's state, out of the working directory (a checkout)."""
    base = environ.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(base) / "liveplex"


@dataclass(frozen=True, slots=True)
class Api:
    """An API server as a kubeconfig names it: URL, the CA it is trusted by, the bearer token."""

    server: str
    tls: ssl.SSLContext
    token: str

    @classmethod
    def read(cls, path: Path) -> Api:
        """From a kubeconfig the emulator wrote (one cluster, one user, the CA inline)."""
        with cli.needs(*EXTRAS):
            import yaml

        try:
            config = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ValueError(f"{path} is not a kubeconfig") from exc
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        return cls(cluster["server"], ssl.create_default_context(cadata=ca), user["token"])

    def call(self, path: str, body: object = None) -> Any:
        """GET `path` (POST `body` when given) and its JSON; raises `urllib.error.URLError`."""
        request = urllib.request.Request(
            self.server + path, method="GET" if body is None else "POST",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, timeout=10, context=self.tls) as response:
            return json.loads(response.read())


def install_crd(api: Api) -> None:
    """POST the LiveEngine CRD (what `liveplex operator crd | kubectl apply -f -` does)."""
    from liveplex.operator import crd  # the operator package, not its kopf shell

    try:
        api.call("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.render_crd())
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # already installed
            raise RuntimeError(f"installing the CRD failed: {exc.code} {exc.read()[:200]!r}") from exc


def crd_served(api: Api) -> bool:
    """Whether a LiveEngine can be applied now: the CRD is Established, discovery lists its
    resource, and its OpenAPI v3 schema (what `kubectl apply` validates against) is served."""
    try:
        got = api.call(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
        conditions = got.get("status", {}).get("conditions", ())
        if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return False
        listed = api.call(f"/apis/{names.API_VERSION}")
        if not any(r.get("name") == names.PLURAL for r in listed.get("resources", ())):
            return False
        root = api.call("/openapi/v3")
        ref = root.get("paths", {}).get(f"apis/{names.API_VERSION}")
        if ref is None:
            return False
        doc = api.call(ref["serverRelativeURL"])
    except (OSError, ValueError, KeyError, AttributeError):  # URLError is an OSError: not up (yet)
        return False
    schemas = doc.get("components", {}).get("schemas", {}).values()
    return any({"group": names.GROUP, "version": names.VERSION, "kind": names.KIND} in s.get(
        "x-kubernetes-group-version-kind", ()) for s in schemas)


def until(check: Callable[[], bool], what: str, deadline_s: float,
          child: subprocess.Popen[bytes] | None = None) -> None:
    """Poll `check()` until true; fail with `what` at the deadline (or when `child` exits first)."""
    end = time.monotonic() + deadline_s
    while not check():
        if child is not None and child.poll() is not None:
            raise RuntimeError(f"the Kubernetes emulator exited with {child.returncode}")
        if time.monotonic() > end:
            raise RuntimeError(f"{what} within {deadline_s:.0f} s")
        time.sleep(0.05)


def publish(private: Path, public: Path) -> None:
    """Copy the emulator's kubeconfig to where the user reads it, in one rename (never half)."""
    from liveplex.emulator import kubeconfig  # the package is the emulator extra's, as `require` checked

    kubeconfig.place(public, private.read_text())


def require() -> None:
    """Import what `--kube` starts, in this process: a missing extra is `up`'s one line before anything
    runs, not a child's traceback once Redis and the emulator do."""
    with cli.needs(*EXTRAS):
        importlib.import_module("liveplex.emulator")
        importlib.import_module("liveplex.operator.handlers")


def wait(kubeconfig: Path, deadline_s: float) -> int:
    """`up --kube --wait`: once `kubeconfig` names a server that serves the CRD (a running `up
    --kube` is ready), print its path for `export KUBECONFIG=$(...)`; 1 at the deadline."""
    def ready() -> bool:
        try:
            return crd_served(Api.read(kubeconfig))
        except (OSError, ValueError, KeyError, IndexError, TypeError):  # not there (yet), or not the emulator's
            return False

    try:
        until(ready, f"no `liveplex up --kube` was ready at {kubeconfig}", deadline_s)
    except RuntimeError as exc:
        print(f"liveplex up --wait: {exc}", file=sys.stderr)
        return 1
    print(kubeconfig.resolve(), flush=True)
    return 0
