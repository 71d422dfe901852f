"""`fold`: a session's startup history (`session.input`) folded into its role prompt.

PersonaPlex has one text context, the role prompt it is prefilled with, and a hard limit on it
(`max_instructions_chars`, derived from the window: personaplex §4.4). A client that reconnects
(LiveKit at `expires_at`) or starts with a chat history sends the conversation so far; the model
gets as much of it as fits after the instructions, newest kept, oldest dropped first, and the
client is told what was dropped. Pure, so the gateway and the pod fold (and refuse) identically.
"""

from __future__ import annotations

from dataclasses import dataclass

from liveplex.gptlive.events import Turn

HEADER = "\n\nConversation so far:"
"""What separates the instructions from the history in the folded prompt."""
_SPEAKERS = {"developer": "Developer", "user": "User", "assistant": "Assistant"}


@dataclass(frozen=True, slots=True)
class Folded:
    """The role prompt to run and how many of the oldest turns did not fit."""

    text: str
    dropped: int


def line(turn: Turn) -> str:
    """One turn as the model reads it: `\\nUser: text` (whitespace runs kept as sent)."""
    return f"\n{_SPEAKERS[turn.role]}: {turn.text.strip()}"


def fold(instructions: str, turns: tuple[Turn, ...], limit: int) -> Folded:
    """`instructions`, then the newest turns that fit within `limit` code points in order.

    Turns whose text is blank carry nothing and are skipped (not counted as dropped). An
    `instructions` already over `limit` is returned unchanged, for the caller's length check.
    """
    kept: list[str] = []
    room = limit - len(instructions) - len(HEADER)
    spoken = [t for t in turns if t.text.strip()]
    for turn in reversed(spoken):
        text = line(turn)
        if len(text) > room:
            break
        kept.append(text)
        room -= len(text)
    if not kept:
        return Folded(instructions, len(spoken))
    return Folded(instructions + HEADER + "".join(reversed(kept)), len(spoken) - len(kept))
