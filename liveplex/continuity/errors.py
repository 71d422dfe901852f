"""What can be wrong with a handover blob, as values: a code and the path of the offending field.

The same shape as `gptlive.errors`: one catalogue, one constructor per template, the path rendered
only at the edge (the pod's import route answers `{"error": {"code", "param", "message"}}`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from liveplex.gptlive.errors import Path, echo, render_path


class Code(enum.Enum):
    MALFORMED = "handover_malformed"
    """Not a blob, truncated, or its header is not what the format says."""
    VERSION = "handover_version"
    """Another format version."""
    ARCHITECTURE = "handover_architecture"
    """Exported by an engine serving another model."""
    WINDOW = "handover_window"
    """Exported by an engine with another context window."""
    VOICE = "handover_voice"
    """A voice this engine does not serve, or not the one the session asks for."""
    ENGINE = "handover_engine"
    """Another engine setting that changes the numbers (schedule, dtype) or another engine kind."""
    STATE = "handover_state"
    """An array is missing or has the wrong dtype or shape for this engine."""


@dataclass(frozen=True)
class HandoverError(Exception):
    """One reason a blob cannot be imported here; returned as a value, raised only inside decoders."""

    code: Code
    path: Path
    message: str

    def __str__(self) -> str:
        return self.message

    @property
    def param(self) -> str | None:
        """The path as the wire shows it; None when the blob as a whole is at fault."""
        return render_path(self.path) or None


def malformed(path: Path, why: str) -> HandoverError:
    return HandoverError(Code.MALFORMED, path, f"Not a handover blob: {why}.")


def version(got: object, want: int) -> HandoverError:
    return HandoverError(Code.VERSION, ("header", "version"),
                         f"Handover format version {echo(got)}; this pod reads version {want}.")


def mismatch(code: Code, path: Path, got: object, want: object) -> HandoverError:
    return HandoverError(code, path,
                         f"The blob's '{render_path(path)}' is '{echo(got)}'; this pod serves '{echo(want)}'.")


def unknown_voice(got: object, served: tuple[str, ...]) -> HandoverError:
    return HandoverError(Code.VOICE, ("header", "voice"),
                         f"The blob's voice '{echo(got)}' is not served here ({len(served)} voices are).")


def state(path: Path, why: str) -> HandoverError:
    return HandoverError(Code.STATE, path, f"The blob's '{render_path(path)}' {why}.")
