"""The chart rendered by Helm's own engine (helm-python-sdk: Helm v4's Go SDK through ctypes, no
binary, no cluster), parsed into objects. `lookup` returns nothing offline, as on a first install."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "liveplex"
RELEASE, NAMESPACE = "lp", "voice"
Obj = dict[str, Any]


@functools.cache
def _chart() -> helm.Chart:
    return helm.Chart.load(CHART)


@functools.cache
def _rendered(values_json: str) -> tuple[tuple[str, str], ...]:
    manifests = _chart().render(json.loads(values_json), name=RELEASE, namespace=NAMESPACE, is_install=True)
    return tuple(sorted(manifests.items()))


def render(values: Obj | None = None) -> list[Obj]:
    """Every object the chart renders with `values`, in template order (NOTES.txt left out)."""
    out: list[Obj] = []
    for path, text in _rendered(json.dumps(values or {}, sort_keys=True)):
        if path.endswith(".txt"):
            continue
        out += [doc for doc in yaml.safe_load_all(text) if doc]
    return out


def notes(values: Obj | None = None) -> str:
    return dict(_rendered(json.dumps(values or {}, sort_keys=True)))["liveplex/templates/NOTES.txt"]


def validate(values: Obj) -> None:
    """Raises helm.HelmValuesError naming the path when values.schema.json refuses `values`."""
    _chart().validate_schema(values)


def lint(values: Obj | None = None) -> dict[str, Any]:
    return helm.lint(CHART, values, strict=True, namespace=NAMESPACE)


def by_kind(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    [found] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found
