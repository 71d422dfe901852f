"""`check_start`: a `session.start` validated against what is served (gpt-live §4.4 step 5).

Pure, so that a pod and the gateway in front of it refuse exactly the same starts with exactly the
same errors: the pod checks against its own `Served`, the gateway against the one its pool
published. The engine's pod checks again and stays authoritative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from liveplex.gptlive import errors, events
from liveplex.gptlive.served import Served
from liveplex.gptlive.voices import DEFAULT_VOICE
from liveplex.live import contract


class Catalog(Protocol):
    """Where a `session.model` is served; `Served` is the catalog of a single server."""

    def served_for(self, model: str) -> Served:
        """The description that serves `model`; raises `ProtocolError` (`model_not_found`, or
        `server_busy` when it is routed but nothing is up to describe it)."""
        ...


@dataclass(frozen=True, slots=True)
class Prepared:
    """An accepted start: what the engine runs, what the client is told, and where it runs."""

    session: contract.Session
    resource: events.SessionResource
    notes: tuple[events.Info, ...]
    """The optional `info` events to send after `session.started`."""
    served: Served


def check_start(catalog: Catalog, event: events.SessionStart, session_id: str, unix_s: float,
                info_events: bool) -> Prepared:
    """Model, voice and instructions of `event`; raises `ProtocolError` naming the parameter.

    `unix_s` is wall time, for `expires_at`.
    """
    config = event.session
    served = catalog.served_for(config.model)
    info = served.info
    native = None if config.voice is None else served.voices.resolve(config.voice)
    try:
        session = info.check(contract.SessionDraft(native, config.instructions))
    except contract.CheckError as exc:
        if exc.param == "instructions":
            text = config.instructions
            length = len(text if text and text.strip() else info.default_instructions)
            raise errors.string_above_max_length(
                ("session", "instructions"), length, info.max_instructions_chars) from exc
        raise errors.invalid_value(("session", "audio", "output", "voice"),
                                   native, info.voices) from exc
    voice = DEFAULT_VOICE if config.voice is None else config.voice
    resource = events.SessionResource(
        id=session_id,
        expires_at=math.floor(unix_s + info.frame_ms(info.max_frames) / 1000),
        model=config.model,
        instructions=session.instructions,
        format=config.format or events.DEFAULT_FORMAT,
        voice=voice,
        delegation=config.delegation,
    )
    notes: list[events.Info] = []
    if info_events:
        if voice != session.voice:
            shown = voice.id if isinstance(voice, events.CustomVoice) else voice
            notes.append(events.Info("voice_mapped", f"Voice '{shown}' is served by the native voice "
                                                     f"'{session.voice}'.", event.event_id))
        if session.instructions != config.instructions:
            notes.append(events.Info("default_instructions",
                                     "No instructions were given; the server default is used.",
                                     event.event_id))
    return Prepared(session, resource, tuple(notes), served)
