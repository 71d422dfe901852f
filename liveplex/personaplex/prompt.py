"""The prompt as model rows, the state a session starts live from, and the prompt limit.

Two conventions, chosen by the checkpoint (`Convention`). PersonaPlex conditions every session on
a voice and a role prompt; its layout (spec personaplex §4.3), with N voice frames and L role
tokens, P = N + 13 + L:

| columns            | content                                                        |
|--------------------|----------------------------------------------------------------|
| 0 .. N-1           | the voice's precomputed input embeddings                       |
| N                  | all 17 streams from the voice's token ring                     |
| N+1                | PAD, SILENCE[0], ring delay-1 agent codes, SINE[0], ring delay-1 user codes |
| N+2 .. N+6         | silence columns (PAD, SILENCE, SINE)                           |
| N+7 .. N+6+L       | silence columns whose text is role token c - N - 7             |
| N+7+L .. P-1       | silence columns                                                |

The `reference` schedule prefills columns N..P-2 and starts live at position P-1; `upstream`
prefills N..P-1 and starts at P (spec §3.4). After the prompt, the agent's acoustic codes and the
user's codes of column P are silence (SILENCE, SINE): the prompt's `tail`.

Kyutai's Moshi takes no prompt: a session starts from nothing, as moshi's `LMGen` does after
`reset_streaming`. Column 0 is all INIT (every stream's delay reaches it), so it is the one
prefilled row (P = 1); the admission draw gives the text and agent cb0 of column 1, whose delayed
streams are INIT too (the tail), and the first live tick runs position 1: it is `LMGen`'s call 1,
whose input holds the caller's first frame. `LMGen`'s call 0, whose input the delays discard, is
the prefill. Only the `upstream` schedule exists for Moshi (the `reference` one is NVIDIA's).
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from liveplex.personaplex import config

SILENCE_FRAMES = 6
"""0.5 s of silence before and after the role text."""


class Convention(enum.Enum):
    """How sessions of a checkpoint are prompted: by its architecture (`model_dir`)."""

    PERSONAPLEX = "personaplex"
    """A voice prompt and a role prompt (16 depformer steps; or 8 with voices, D2)."""
    MOSHI = "moshi"
    """No prompt: the voice is the weights' own (8 depformer steps, no voices)."""


class Schedule(enum.Enum):
    """Which user codes enter the fed column (Decision D3, spec §3.5)."""

    REFERENCE = "reference"
    """NVIDIA's schedule: feeds column o-1 at call o, one frame behind upstream."""
    UPSTREAM = "upstream"
    """Kyutai's schedule: the same token stream, 80 ms sooner."""


DEFAULT_SCHEDULE = Schedule.UPSTREAM
"""D3 settled by `test_upstream_is_reference_one_frame_earlier` (greedy and sampled, three
sessions, 150 frames past the window): upstream emits at tick k what reference emits at k+1."""


def silence_column(text: int = config.TEXT_PAD) -> torch.Tensor:
    """[17] int64: text, agent SILENCE, user SINE."""
    return torch.tensor([text, *config.SILENCE, *config.SINE], dtype=torch.long)


@dataclasses.dataclass(frozen=True, slots=True)
class Prompt:
    """One session's prompt as model input."""

    voice: torch.Tensor
    """[N, dim] voice input embeddings (positions 0..N-1); N = 0 for Moshi."""
    columns: torch.Tensor
    """[R, 17] int64 token columns prefilled at positions N..N+R-1."""
    role_tokens: int
    """L."""
    total: int
    """P: the column of the first live row under `upstream` (N + 13 + L; 1 for Moshi)."""
    tail: torch.Tensor
    """[17] int64 whose delayed streams are column P's (and whose text and agent part is column
    P-1's under `reference`): the start state's agent acoustic and user codes (spec §3.4)."""

    @property
    def voice_frames(self) -> int:
        return self.voice.shape[0]


def layout(voice: torch.Tensor, ring_n: torch.Tensor, ring_next: torch.Tensor, role_ids: list[int],
           schedule: Schedule) -> Prompt:
    """Lay out a prompt.

    voice: [N, dim] embeddings; ring_n: [17] the voice ring's column N; ring_next: [17] its column
    N+1 (only the delay-1 streams are read); role_ids: the wrapped, tokenized role prompt.
    """
    delayed = torch.tensor(config.DELAYS, dtype=torch.bool)
    first = torch.where(delayed, ring_next.long(), silence_column())
    cols = [ring_n.long(), first]
    cols += [silence_column()] * (SILENCE_FRAMES - 1)
    cols += [silence_column(t) for t in role_ids]
    cols += [silence_column()] * SILENCE_FRAMES
    total = voice.shape[0] + len(cols)
    if schedule is Schedule.REFERENCE:
        cols = cols[:-1]
    return Prompt(voice, torch.stack(cols), len(role_ids), total, silence_column())


def bare(init_column: tuple[int, ...], dim: int) -> Prompt:
    """Moshi's empty prompt: the all-INIT column 0 at position 0 (`LMConfig.init_column`)."""
    column = torch.tensor(init_column, dtype=torch.long)
    return Prompt(torch.zeros(0, dim), column[None], 0, 1, column)


def start_position(prompt: Prompt, schedule: Schedule) -> int:
    """Position of the first live row: P-1 (reference) or P (upstream)."""
    return prompt.total - (1 if schedule is Schedule.REFERENCE else 0)


def max_instructions_chars(context: int, max_voice_frames: int) -> int:
    """The role-prompt character limit that lets any allowed prompt fit (Decision D5, §4.4).

    Wrapping adds at most 18 characters and a character costs at most 4 tokens (byte fallback),
    plus one word-start piece; the first live row under `upstream` (position N + 13 + L) must still
    see position 0, so N + 12 + L <= context - 2. 715 for the real context and a 50-frame voice.
    """
    return max(0, (context - 15 - max_voice_frames) // 4 - 18)
