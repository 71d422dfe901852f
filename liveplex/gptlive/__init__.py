"""The GPT-Live front end: protocol core (`Connection`), events, errors, formats and the app.

See docs/gptlive.md.
"""

from liveplex.gptlive.app import create_app
from liveplex.gptlive.connection import (
    LEGAL,
    Action,
    Append,
    Close,
    Connection,
    Hangup,
    Release,
    Send,
    Start,
    State,
)
from liveplex.gptlive.errors import Code, ProtocolError
from liveplex.gptlive.events import dump, parse
from liveplex.gptlive.settings import Settings, add_arguments, settings_from_args
from liveplex.gptlive.tally import Tally
from liveplex.gptlive.voices import Voices

__all__ = [
    "create_app",
    "LEGAL", "Action", "Append", "Close", "Connection", "Hangup", "Release", "Send", "Start",
    "State",
    "Code", "ProtocolError",
    "dump", "parse",
    "Settings", "add_arguments", "settings_from_args",
    "Tally", "Voices",
]
