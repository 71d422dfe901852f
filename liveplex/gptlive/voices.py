"""Voice resolution (gpt-live §5.4): a requested voice -> a native PersonaPlex voice name.

Three kinds are accepted: a native name (with or without `.pt`), one of OpenAI's built-in names
through a configurable table, and `{"id": X}` for a voice file in the server's registry directory
(`X.pt`). The result then goes through `LiveInfo.check`, so an engine that lacks the voice still
refuses it. Custom ids resolve to the id itself: the engine must list registry ids among its voices
(`registry_ids` gives them to whoever builds the `LiveInfo`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path as FilePath

from liveplex.gptlive import errors
from liveplex.gptlive.events import CustomVoice, Voice

BUILTIN: Mapping[str, str] = {
    "marin": "NATF2", "cedar": "NATM1", "alloy": "VARF0", "coral": "NATF0", "sage": "NATF1",
    "shimmer": "NATF3", "ash": "NATM0", "echo": "NATM3", "verse": "VARM0", "ballad": "VARM1",
    "beacon": "VARM2", "bossa": "VARM3", "cinder": "NATM2", "delta": "VARM4", "gleam": "VARF1",
    "meridian": "VARF2", "quartz": "VARF3", "ripple": "VARF4", "shida": "VARF2", "stone": "VARM4",
    "tempo": "NATM2", "vesper": "NATF1", "willow": "VARF0",
}
"""gpt-live §5.4's starting table of OpenAI's 23 built-in names (to be tuned by listening)."""

DEFAULT_VOICE = "marin"
"""What `session.started` echoes when no voice was given; it maps to NATF2."""

VOICE_FILE_SUFFIX = ".pt"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_VOICE_PARAM: errors.Path = ("session", "audio", "output", "voice")


def registry_ids(directory: FilePath | None) -> tuple[str, ...]:
    """The custom voice ids a registry directory holds (`<id>.pt` files), sorted."""
    if directory is None or not directory.is_dir():
        return ()
    return tuple(sorted(p.stem for p in directory.glob("*" + VOICE_FILE_SUFFIX)
                        if _SAFE_ID.fullmatch(p.stem)))


@dataclass(frozen=True, slots=True)
class Voices:
    """The accepted voice names of one server; built once at startup."""

    native: tuple[str, ...]
    """The engine's native voice names (`LiveInfo.voices`)."""
    builtin: Mapping[str, str]
    """OpenAI built-in name -> native name."""
    custom: tuple[str, ...] = ()
    """Registered custom voice ids."""

    def names(self) -> list[str]:
        """What `/v1/audio/voices` lists: native names, then the built-in names mapped onto them."""
        return list(self.native) + sorted(n for n, native in self.builtin.items() if native in self.native)

    def resolve(self, voice: Voice) -> str:
        """The native name for `voice`; raises `ProtocolError` (invalid_value) when unknown."""
        if isinstance(voice, CustomVoice):
            if voice.id in self.custom:
                return voice.id
            raise errors.invalid_value(_VOICE_PARAM, voice.id, self.custom or ("(none registered)",))
        if voice in self.builtin and self.builtin[voice] in self.native:
            return self.builtin[voice]
        name = voice[: -len(VOICE_FILE_SUFFIX)] if voice.endswith(VOICE_FILE_SUFFIX) else voice
        if name in self.native:
            return name
        raise errors.invalid_value(_VOICE_PARAM, voice, self.names())
