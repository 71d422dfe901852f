"""Command-line flags whose defaults live in a settings dataclass, so each default is written once."""

from __future__ import annotations

import dataclasses
from typing import Any


def default_of(cls: type, name: str) -> Any:
    """The default of dataclass field `name` of `cls` (for an argparse `default=`)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    raise KeyError(f"{cls.__name__} has no default for {name!r}")
