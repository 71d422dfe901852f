"""`Served`: what one server (a pod, or a pool behind the gateway) serves, as a serialisable value.

It is the single description that `/live/config` publishes, that a pod writes to Redis for its
pool, and that the gateway reads back to validate a `session.start` before placing it: the engine's
`LiveInfo`, the voices it accepts and the model names it answers to. `config()` and
`from_config()` are inverse (`from_config(s.config()) == s`), so a gateway validates exactly as the
pod would. The keys beyond the ones a client reads (`native_voices`, `voice_map`, ...) are what
make the round trip exact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from liveplex.gptlive import errors, formats
from liveplex.gptlive.voices import DEFAULT_VOICE, Voices
from liveplex.live import contract

DEFAULT_ALIASES: tuple[str, ...] = ("gpt-live-1", "gpt-live-1.1")
"""The model names a server answers to besides its engine's id unless configured otherwise:
OpenAI's GPT-Live models as of openai 3.57, so a client's default model name just works."""


_WHOLE_NUMBER = re.compile(r"-?[0-9]+")


def setting_value(text: str) -> str | int:
    """An engine setting (`LiveInfo.engine`, text, as metric labels need) as `/live/config` gives it
    at its top level: a whole number as a JSON number, like every other number there; else the text."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else text


@dataclass(frozen=True, slots=True)
class Served:
    """A server's model, voices and limits; see the module docstring."""

    info: contract.LiveInfo
    voices: Voices
    aliases: tuple[str, ...] = ()
    """Model names accepted besides `info.model` (gpt-live §5.1's allow-list)."""
    pauses: bool = False
    """The engines may take a session out of the batch and wake it (docs/pause.md): a media
    session's `wake_policy` and `idle_timeout_s` are honoured, else refused by name."""

    @property
    def models(self) -> tuple[str, ...]:
        """Every accepted `session.model`, the engine's own id first."""
        return (self.info.model, *(a for a in self.aliases if a != self.info.model))

    def served_for(self, model: str) -> Served:
        """This description when it serves `model`; else `model_not_found` on `session.model`."""
        if model not in self.models:
            raise errors.model_not_found(model, self.models)
        return self

    def config(self) -> dict[str, Any]:
        """The `/live/config` document (JSON types only)."""
        info = self.info
        return {
            **{name: setting_value(value) for name, value in info.engine},
            "model": info.model, "models": list(self.models),
            "sample_rate": info.sample_rate, "frame_ms": info.frame_ms(1),
            "frame_samples": info.frame_samples, "voices": self.voices.names(), "voice": DEFAULT_VOICE,
            "instructions": info.default_instructions,
            "max_instructions_chars": info.max_instructions_chars,
            "max_seconds": info.frame_ms(info.max_frames) / 1000, "max_frames": info.max_frames,
            "max_sessions": info.max_sessions, "context_frames": info.context_frames,
            "tick_groups": info.tick_groups,
            "formats": [{"type": f.type, "rate": f.rate} for f in formats.SERVED],
            "native_voices": list(info.voices), "default_native_voice": info.default_voice,
            "voice_map": dict(self.voices.builtin), "custom_voices": list(self.voices.custom),
            "engine": [list(pair) for pair in info.engine],  # as the engine gave them: what `from_config` reads
            "pauses": self.pauses,
        }

    @staticmethod
    def from_config(config: Mapping[str, Any]) -> Served:
        """The inverse of `config()`; raises ValueError naming the first missing or bad key."""
        try:
            info = contract.LiveInfo(
                model=str(config["model"]), sample_rate=int(config["sample_rate"]),
                frame_samples=int(config["frame_samples"]),
                voices=tuple(str(v) for v in config["native_voices"]),
                default_voice=str(config["default_native_voice"]),
                default_instructions=str(config["instructions"]),
                max_instructions_chars=int(config["max_instructions_chars"]),
                max_sessions=int(config["max_sessions"]), max_frames=int(config["max_frames"]),
                context_frames=int(config.get("context_frames", 0)),
                tick_groups=int(config.get("tick_groups", 1)),
                engine=tuple((str(k), str(v)) for k, v in config.get("engine", ())),
            )
            voices = Voices(info.voices, {str(k): str(v) for k, v in config["voice_map"].items()},
                            tuple(str(v) for v in config["custom_voices"]))
            models = tuple(str(m) for m in config["models"])
            pauses = config.get("pauses", False)
            if not isinstance(pauses, bool):
                raise TypeError(f"'pauses' must be a boolean, got {pauses!r}")
        except KeyError as exc:
            raise ValueError(f"served config: missing key {exc.args[0]!r}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"served config: {exc}") from exc
        return Served(info, voices, tuple(m for m in models if m != info.model), pauses)
