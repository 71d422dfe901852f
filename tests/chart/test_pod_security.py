"""Every pod the chart renders (workload templates and the `helm test` pod), over the whole values
matrix, passes Pod Security "restricted" (tests/support/pod_security.py); the checker itself
catches each control it claims to check."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.chart import render
from tests.chart.test_chart import MATRIX
from tests.support import pod_security


@pytest.mark.parametrize("case", MATRIX)
def test_every_chart_pod_passes_the_restricted_profile(case: str) -> None:
    pods = list(pod_security.pod_templates(render.render(MATRIX[case])))
    names = {name for name, _, _ in pods}
    assert {"Deployment/lp-liveplex-operator", "Deployment/lp-liveplex-gateway", "Pod/lp-liveplex-check"} <= names
    assert {name: pod_security.violations(pod, meta) for name, pod, meta in pods} == {name: [] for name in names}


def _gateway_pod() -> dict[str, Any]:
    [(_, pod, _)] = [p for p in pod_security.pod_templates(render.render()) if p[0] == "Deployment/lp-liveplex-gateway"]
    return copy.deepcopy(pod)


BREAKS: dict[str, Any] = {
    "host namespaces": lambda p: p.update(hostNetwork=True),
    "HostProcess": lambda p: p["securityContext"].update(windowsOptions={"hostProcess": True}),
    "privileged containers": lambda p: p["containers"][0]["securityContext"].update(privileged=True),
    "host ports": lambda p: p["containers"][0]["ports"][0].update(hostPort=8080),
    "AppArmor": lambda p: p["securityContext"].update(appArmorProfile={"type": "Unconfined"}),
    "SELinux": lambda p: p["securityContext"].update(seLinuxOptions={"type": "spc_t"}),
    "/proc mount type": lambda p: p["containers"][0]["securityContext"].update(procMount="Unmasked"),
    "sysctls": lambda p: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
    "probe and lifecycle hosts": lambda p: p["containers"][0]["readinessProbe"]["httpGet"].update(host="10.0.0.1"),
    "volume types": lambda p: p.update(volumes=[{"name": "w", "hostPath": {"path": "/srv"}}]),
    "privilege escalation": lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
    "running as non-root": lambda p: p["securityContext"].pop("runAsNonRoot"),
    "running as non-root user": lambda p: p["containers"][0]["securityContext"].update(runAsUser=0),
    "seccomp": lambda p: p["containers"][0]["securityContext"].update(seccompProfile={"type": "Unconfined"}),
    "capabilities": lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
}


def test_the_checker_catches_every_control_it_names() -> None:
    assert set(BREAKS) == set(pod_security.CONTROLS)
    assert pod_security.violations(_gateway_pod()) == []
    for control, break_ in BREAKS.items():
        pod = _gateway_pod()
        break_(pod)
        assert pod_security.violations(pod) == [control], control
