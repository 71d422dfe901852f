"""A CustomResourceDefinition's own validation: what kube-apiserver refuses in a CRD at write time.

Development emulator, not for production. Pure.
"""

from __future__ import annotations

from liveplex.emulator.apiserver.errors import Cause


def check(crd: dict, old: dict | None) -> list[Cause]:
    """Causes for a defaulted CRD (`old` is the stored one on updates)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    expected = f"{names.get('plural')}.{spec.get('group')}"
    out = []
    if crd["metadata"]["name"] != expected:
        out.append(Cause("metadata.name", f'Invalid value: "{crd["metadata"]["name"]}": must be spec.names.plural+"."'
                                          "+spec.group"))
    if len([v for v in spec.get("versions") or [] if v.get("storage")]) != 1:
        out.append(Cause("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    return out
