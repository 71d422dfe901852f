"""The GPT-Live protocol, pure: events, errors, formats, what is served, start validation and the
`Connection` state machine. It imports no server and no engine: a pod and the gateway both run it.
The server layer (uvicorn adapter, socket pump, sweeper) is `liveplex.gptlive.server`.

See docs/gptlive.md.
"""

from liveplex.gptlive.connection import (
    LEGAL,
    Accepted,
    Append,
    Close,
    Command,
    Connection,
    Ended,
    Handoff,
    Hangup,
    Outcome,
    Refused,
    Release,
    Send,
    Start,
    State,
)
from liveplex.gptlive.errors import Code, ProtocolError
from liveplex.gptlive.events import dump, parse
from liveplex.gptlive.served import Served
from liveplex.gptlive.settings import Settings
from liveplex.gptlive.start import Catalog, Prepared, check_start
from liveplex.gptlive.voices import Voices

__all__ = [
    "LEGAL", "Accepted", "Append", "Close", "Command", "Connection", "Ended", "Handoff", "Hangup",
    "Outcome", "Refused", "Release", "Send", "Start", "State",
    "Code", "ProtocolError",
    "dump", "parse",
    "Served", "Settings",
    "Catalog", "Prepared", "check_start",
    "Voices",
]
