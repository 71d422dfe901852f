"""The error catalogue end to end: every error a socket can be sent, with its type, code and param.

Events in, events out: each row drives a `Connection` to one refusal and reads the `error` event it
sends. Every code of the catalogue has a row, and so has every place that raises after parsing
(the parser's own param paths are pinned one by one in test_events.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass

import orjson
import pytest

from liveplex.gptlive import connection as c
from liveplex.gptlive import errors, events
from liveplex.gptlive.served import Served
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.voices import BUILTIN, Voices
from liveplex.live import contract
from liveplex.personaplex.voice_names import VOICES

MS = 1_000_000
INFO = contract.LiveInfo(model="liveplex-sim", sample_rate=24000, frame_samples=1920, voices=VOICES,
                         default_voice="NATF2", default_instructions="You echo the caller.",
                         max_instructions_chars=24, max_sessions=2, max_frames=3000)
SETTINGS = Settings()
REGISTERED = "custom1"
"""A registry voice id the engine does not list: resolved, then refused by `LiveInfo.check`."""


def connection() -> c.Connection:
    """The one place this module builds a `Connection` (a fresh socket, nothing received yet)."""
    return c.Connection(Served(INFO, Voices(VOICES, BUILTIN, (REGISTERED,)), ("gpt-live-1",)), SETTINGS, 0)


def start(**session: object) -> str:
    return orjson.dumps({"type": "session.start", "session": {"model": "gpt-live-1", **session}}).decode()


def voice(value: object) -> str:
    return start(audio={"output": {"voice": value}})


def append(audio: str) -> str:
    return orjson.dumps({"type": "session.input_audio.append", "audio": audio}).decode()


def starting(conn: c.Connection) -> c.Connection:
    """A start handed to the engine, no answer yet."""
    assert [type(a) for a in conn.receive(start(), 0, 0.0)] == [c.Start]
    return conn


def live(conn: c.Connection) -> c.Connection:
    starting(conn).deliver([contract.Started()])
    return conn


def closing(conn: c.Connection) -> c.Connection:
    assert live(conn).receive('{"type":"session.close"}', 0, 0.0) == [c.Hangup()]
    return conn


def sent(message: str | bytes, state: Callable[[c.Connection], c.Connection] = lambda conn: conn,
         ) -> Callable[[c.Connection], list[c.Action]]:
    """Receive `message` in `state` (idle by default)."""
    return lambda conn: state(conn).receive(message, 0, 0.0)


ABORTED = contract.Closed.refused(contract.CloseReason.ABORTED)
BUSY = contract.Closed.refused(contract.CloseReason.BUSY)


@dataclass(frozen=True)
class Case:
    name: str
    drive: Callable[[c.Connection], list[c.Action]]
    code: str
    param: str | None


IR, SERVER = "invalid_request_error", "server_error"
CASES = [
    # one per code the parser raises (their param paths: test_events.py)
    Case("not json", sent("{"), "invalid_json", None),
    Case("binary frame", sent(b"{}"), "invalid_json", None),
    Case("no type", sent('{"event_id":"e"}'), "missing_required_parameter", "type"),
    Case("numeric event_id", sent('{"type":"session.close","event_id":5}'), "invalid_type", "event_id"),
    Case("unknown field", sent('{"type":"session.close","x":1}'), "unknown_parameter", "x"),
    Case("client field", sent(start(client={})), "unsupported_parameter", "session.client"),
    Case("store true", sent(start(store=True)), "unsupported_value", "session.store"),
    Case("long history", sent(start(input=[{"role": "user", "content": [{"text": "hi"}]}] * 129)),
         "array_above_max_length", "session.input"),
    Case("bad history role", sent(start(input=[{"role": "user", "content": [{"text": "hi"}]},
                                               {"role": "tool", "content": []}])),
         "invalid_value", "session.input[1].role"),
    Case("commentary with a delegation id", sent('{"type":"session.commentary.append","content":"hi",'
                                                 '"delegation_id":"d1"}', live), "invalid_value", "delegation_id"),
    Case("commentary before start", sent('{"type":"session.commentary.append","content":"hi"}'),
         "session_not_started", "type"),
    Case("refused type", sent('{"type":"response.create"}'), "unsupported_event", "type"),
    Case("unknown type", sent('{"type":"foo.bar"}'), "unknown_event", "type"),
    # what session.start checks after parsing (gpt-live §4.4 step 5)
    Case("unserved model", sent(start(model="nope")), "model_not_found", "session.model"),
    Case("long instructions", sent(start(instructions="x" * 25)), "string_above_max_length",
         "session.instructions"),
    Case("unknown voice name", sent(voice("nope")), "invalid_value", "session.audio.output.voice"),
    Case("unregistered voice id", sent(voice({"id": "nope"})), "invalid_value",
         "session.audio.output.voice"),
    Case("voice the engine lacks", sent(voice({"id": REGISTERED})), "invalid_value",
         "session.audio.output.voice"),
    # audio chunks (gpt-live §6.1)
    Case("not base64", sent(append("!!!!"), live), "invalid_value", "audio"),
    Case("empty chunk", sent(append(""), live), "invalid_value", "audio"),
    Case("odd bytes", sent(append("AA"), live), "invalid_value", "audio"),
    Case("over 30 s", sent(append(base64.b64encode(bytes(1_440_002)).decode()), live), "invalid_value",
         "audio"),
    # the state table (gpt-live §3)
    Case("append before start", sent(append("AAAA")), "session_not_started", "type"),
    Case("close before start", sent('{"type":"session.close"}'), "session_not_started", "type"),
    Case("second start", sent(start(), live), "session_already_started", "type"),
    Case("mute after close", sent('{"type":"session.input_audio.mute"}', closing), "session_closing",
         "type"),
    # the engine's answers (gpt-live §8.3, §9.2)
    Case("queue full", lambda conn: starting(conn).rejected(conn.busy()), "server_busy", None),
    Case("engine at its cap", lambda conn: starting(conn).deliver([BUSY]), "server_busy", None),
    Case("engine stopped", lambda conn: starting(conn).rejected(errors.server_error("stopped")), "server_error",
         None),
    Case("start refused", lambda conn: starting(conn).deliver([ABORTED]), "server_error", None),
    Case("start unanswered", lambda conn: starting(conn).timer(SETTINGS.start_timeout_ms * MS),
         "server_error", None),
    Case("session aborted", lambda conn: live(conn).deliver(
        [contract.Closed(contract.CloseReason.ABORTED, 3, 0, 0)]), "server_error", None),
    Case("outputs ended", lambda conn: live(conn).deliver([]), "server_error", None),
    Case("server stopping", lambda conn: live(conn).shutdown(), "server_shutdown", None),
    # a gateway's own refusal, before the socket's machine has a session (docs/continuity.md)
    Case("re-attach to no session", lambda conn: [c.Send(events.Error(errors.session_not_found("sess_gone"), None))],
         "session_not_found", "session_id"),
]
SERVER_CODES = {"server_busy", "server_error", "server_shutdown"}


def error_events(actions: list[c.Action]) -> list[dict]:
    bodies = [orjson.loads(events.dump(a.event)) for a in actions if isinstance(a, c.Send)]
    return [body["error"] for body in bodies if body["type"] == "error"]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_error_has_its_type_code_and_param(case: Case) -> None:
    [error] = error_events(case.drive(connection()))
    kind = SERVER if case.code in SERVER_CODES else IR
    assert (error["type"], error["code"], error["param"]) == (kind, case.code, case.param)
    assert error["message"]


def test_every_code_of_the_catalogue_has_a_case() -> None:
    assert {case.code for case in CASES} == {code.value for code in errors.Code}
