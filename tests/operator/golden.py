"""Golden YAML files under tests/operator/golden/, rewritten only with LIVEPLEX_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("LIVEPLEX_UPDATE_GOLDEN") == "1"


def dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, width=120)


def assert_golden(name: str, obj: Any) -> None:
    """`obj` must equal golden/<name>.yaml; the diff shows in the assertion."""
    path = GOLDEN / f"{name}.yaml"
    if UPDATE:
        path.write_text(dump(obj))
    assert path.exists(), f"missing {path}: run with LIVEPLEX_UPDATE_GOLDEN=1 once and review the file"
    assert dump(obj) == path.read_text(), f"{path} differs; if intended, rerun with LIVEPLEX_UPDATE_GOLDEN=1"
