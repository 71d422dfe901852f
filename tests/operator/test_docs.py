"""docs/operator.md documents every spec field with the CRD's default, every CEL rule and every reason."""

from __future__ import annotations

import re
from typing import Any

from liveplex.operator import cel, crd
from liveplex.operator.status import Reason
from tests.operator.objects import ROOT

DOC = (ROOT / "docs" / "operator.md").read_text()


def _fields(node: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    out = [(path, node.get("default"))]
    children = node.get("properties") or node.get("items", {}).get("properties", {})
    sep = "[]." if node.get("type") == "array" else "."
    for key, sub in children.items():
        out += _fields(sub, f"{path}{sep}{key}")
    return out


def test_every_spec_field_has_a_row_with_its_default() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| [^|]+ \| ([^|]*) \|", DOC, re.M)}
    for path, default in _fields(crd.SPEC, "spec"):
        assert path in rows, f"docs/operator.md has no row for {path}"
        if isinstance(default, (bool, int, str)):
            shown = str(default).lower() if isinstance(default, bool) else str(default)
            assert rows[path].strip() == f"`{shown}`", path


def test_every_rule_and_reason_is_documented() -> None:
    assert all(rule.message in DOC for rule in cel.RULES)
    assert all(f"`{reason}`" in DOC for reason in Reason)
