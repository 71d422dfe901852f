"""`check_start`: a `session.start` validated against what is served (gpt-live §4.4 step 5).

Pure, so that a pod and the gateway in front of it refuse exactly the same starts with exactly the
same errors: the pod checks against its own `Served`, the gateway against the one its pool
published. The engine's pod checks again and stays authoritative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from liveplex.gptlive import errors, events, history
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
    """The `info` events to send after `session.started`: what the client must know (history
    dropped, delegation not used) always, the optional ones with `info_events`."""
    served: Served


def check_start(catalog: Catalog, event: events.SessionStart, session_id: str, unix_s: float,
                info_events: bool) -> Prepared:
    """Model, voice and instructions of `event`; raises `ProtocolError` naming the parameter.

    The history in `session.input` is folded into the role prompt (`history.fold`); the resource
    echoes the instructions alone. `unix_s` is wall time, for `expires_at`.
    """
    config = event.session
    served = catalog.served_for(config.model)
    info = served.info
    native = None if config.voice is None else served.voices.resolve(config.voice)
    given = config.instructions
    instructions = given if given and given.strip() else info.default_instructions
    folded = history.fold(instructions, config.input, info.max_instructions_chars)
    try:
        session = info.check(contract.SessionDraft(native, folded.text))
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
        instructions=instructions,
        format=config.format or events.DEFAULT_FORMAT,
        voice=voice,
        delegation=config.delegation,
        safety_identifier=config.safety_identifier,
    )
    notes: list[events.Info] = []
    if folded.dropped:
        notes.append(events.Info(
            "input_truncated", f"The {folded.dropped} oldest of the {len(config.input)} session.input messages "
            f"were dropped: the role prompt holds at most {info.max_instructions_chars} characters.",
            event.event_id))
    if isinstance(config.delegation, events.ResponsesDelegation):
        notes.append(events.Info(
            "delegation_unused", "Delegation 'responses' is recorded, but this model never delegates: no "
            "session.delegation.* or response.* events will follow.", event.event_id))
    if info_events:
        if voice != session.voice:
            shown = voice.id if isinstance(voice, events.CustomVoice) else voice
            notes.append(events.Info("voice_mapped", f"Voice '{shown}' is served by the native voice "
                                                     f"'{session.voice}'.", event.event_id))
        if instructions != given:
            notes.append(events.Info("default_instructions",
                                     "No instructions were given; the server default is used.",
                                     event.event_id))
    return Prepared(session, resource, tuple(notes), served)
