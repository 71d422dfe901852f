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


NOT_PAUSING = ("this server's engines hold no paused session, so inference can neither wait for the "
               "caller's speech nor pause (a pod needs the `pause` extra, Silero VAD and --max-paused "
               "above 0: docs/pause.md).")
"""Why a server that cannot pause refuses `wake_policy` and `idle_timeout_s` (`Served.pauses`)."""


@dataclass(frozen=True, slots=True)
class Wake:
    """A media session's accepted `wake_policy` with its `idle_timeout_s`: what the pod's idle
    pause runs (docs/pause.md); the call waits for the caller's first speech."""

    vad_threshold: float
    idle_timeout_s: int | None
    """None: once woken, inference stays on until the session ends."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """An accepted start: what the engine runs, what the client is told, and where it runs."""

    session: contract.Session
    resource: events.SessionResource
    notes: tuple[events.Info, ...]
    """The `info` events to send after `session.started`: what the client must know (history
    dropped, delegation not used) always, the optional ones with `info_events`."""
    served: Served
    wake: Wake | None = None


def _wake(config: events.SessionConfig, served: Served, media: bool) -> Wake | None:
    """`wake_policy` and `idle_timeout_s`: a media session's fields (a socket's start has no such
    field), the timeout only with a speech wake policy (openai 3.63: it pauses "a session with a
    speech wake policy", which alone can wake it), honoured where the engines can pause."""
    policy, idle = config.wake_policy, config.idle_timeout_s
    if policy is None and idle is None:
        return None
    key = "wake_policy" if policy is not None else "idle_timeout_s"
    if not media:
        raise errors.unknown_parameter(("session", key))
    if policy is None:
        raise errors.missing_required_parameter(("session", "wake_policy"))
    if not served.pauses:
        raise errors.not_honoured(("session", key), NOT_PAUSING)
    return Wake(policy.vad_threshold, idle)


def check_start(catalog: Catalog, event: events.SessionStart, session_id: str, unix_s: float,
                info_events: bool, media: bool = False, stores: bool = False) -> Prepared:
    """Model, voice and instructions of `event`, a media session's wake (`media`: the start
    is a WebRTC call's) and `store` (`stores`: something keeps stored sessions: a gateway with a
    store, or a pod behind a gateway, which stores for it); raises `ProtocolError` naming the
    parameter.

    The history in `session.input` is folded into the role prompt (`history.fold`); the resource
    echoes the instructions alone. `unix_s` is wall time, for `expires_at`.
    """
    config = event.session
    served = catalog.served_for(config.model)
    wake = _wake(config, served, media)
    if config.store and not stores:
        raise errors.store_unavailable()
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
        store=config.store,
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
    return Prepared(session, resource, tuple(notes), served, wake)
