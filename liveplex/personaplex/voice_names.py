"""The names of PersonaPlex's released voices and the default one: where the model's voices are listed.

Pure (no torch): the sim advertises the same names, and a Moshi checkpoint, which has one voice of
its own, answers to them too, so one voice table (gptlive/voices.py) fits every engine.
"""

from __future__ import annotations

VOICES: tuple[str, ...] = tuple(sorted(
    [f"NATF{i}" for i in range(4)] + [f"NATM{i}" for i in range(4)]
    + [f"VARF{i}" for i in range(5)] + [f"VARM{i}" for i in range(5)]
))
"""The 18 voices PersonaPlex-7B ships (`voices/<name>.pt`)."""

DEFAULT_VOICE = "NATF2"
"""The voice a session gets when its client names none (GPT-Live's default, `marin`, maps to it)."""
