"""The live step (spec personaplex §3.4): one tick of every session in slots 0..B-1, batched.

Per-slot token state after the prompt is enough for both schedules:

| field     | shape  | meaning                                                                  |
|-----------|--------|--------------------------------------------------------------------------|
| `pos`     | [S]    | position of the row this tick runs                                       |
| `ahead`   | [S, 9] | text and agent cb0..7 of column `pos`, drawn at the previous tick        |
| `u1`,`u2` | [S, 8] | the caller codes of the previous tick and (`reference`) of the one before |
| `forced`  | [S, 7] | agent cb1..7 teacher-forced while `forcing` (first reference tick only)  |
| `key`     | [S]    | the session's sampling key (`sampling.key` of its seed)                  |
| `say`     | [S, K] | commentary text ids to say (`session.commentary.append`), `say_len` of them |
| `say_at`  | [S]    | how many of them were said                                               |

A tick feeds `ahead ++ user_part`, draws the text and agent codebooks of column pos+1, and emits
`[ahead[0], ahead[1], a[1..7]]`: the text id and agent frame (cb0 of column pos, cb1..7 of pos+1).
Commentary constrains the text stream: where a row's draw is a word (not PAD or end-of-padding)
while it has commentary left, the next commentary id is taken instead, and the depformer voices it
(`speak`). The model keeps its timing (it still chooses when to speak) and its voice.
No host synchronisation, no clock, no globals: the engine runs it inside a CUDA graph. How tokens
are drawn is a `Draw` the caller passes (`sampled_draws` in the engine; tests wrap it to force
tokens), so the served step carries no test hook.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import torch

from liveplex.personaplex import config, depformer, kernels, prompt, ring, sampling, slots, temporal

A = config.AGENT_CODEBOOKS
SAY_TOKENS = 512
"""Commentary ids a slot holds at once (`TokenState.say`): the SDK's 500-token limit per append."""
SILENT = (0, config.TEXT_PAD)
"""End-of-padding and PAD: a draw of either is the model staying silent, never replaced."""


@dataclasses.dataclass(frozen=True, slots=True)
class TokenState(slots.RowState):
    """Token state of `slots` sessions, preallocated; rows change only by `start`, `live_step`
    and the slot interface."""

    pos: torch.Tensor
    ahead: torch.Tensor
    u1: torch.Tensor
    u2: torch.Tensor
    forced: torch.Tensor
    forcing: torch.Tensor
    key: torch.Tensor
    say: torch.Tensor
    say_len: torch.Tensor
    say_at: torch.Tensor

    @classmethod
    def allocate(cls, slots_: int, device: torch.device | str = "cpu") -> TokenState:
        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.long, device=device)
        return cls(z(slots_), z(slots_, 1 + A), z(slots_, A), z(slots_, A), z(slots_, A - 1),
                   torch.zeros(slots_, dtype=torch.bool, device=device), z(slots_),
                   z(slots_, SAY_TOKENS), z(slots_), z(slots_))

    def load_commentary(self, slot: int, ids: list[int]) -> None:
        """Slot `slot` says `ids` (at most `SAY_TOKENS`) from its next word on, replacing what it
        had left: the host loads the next text only once `say_at` reached `say_len`."""
        assert 0 < len(ids) <= SAY_TOKENS, f"{len(ids)} commentary ids; a slot holds 1..{SAY_TOKENS}"
        self.say[slot, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        self.say_len[slot] = len(ids)
        self.say_at[slot] = 0

    def start(self, rows: slice, schedule: prompt.Schedule, position: torch.Tensor, key: torch.Tensor,
              tail: torch.Tensor, admission: torch.Tensor | None = None) -> None:
        """Set newcomers' rows to §3.4's start state, from device tensors (no host sync).

        position, key: [n] (key: `sampling.key` of the seeds); tail: [n, 17], each prompt's
        `Prompt.tail`; admission: [n, 2], the upstream admission draw (text, agent cb0 of column
        P): the agent's other codes and the user's previous ones come from the tail. `reference`
        starts from the tail column itself, with agent cb1..7 forced to the tail's on its first tick.
        """
        self.pos[rows] = position
        self.say_len[rows] = 0
        self.say_at[rows] = 0
        self.u1[rows] = tail[:, 1 + A:]
        self.u2[rows] = tail[:, 1 + A:]
        self.key[rows] = key
        if schedule is prompt.Schedule.REFERENCE:
            self.ahead[rows] = tail[:, :1 + A]
            self.forced[rows] = tail[:, 2:1 + A]
            self.forcing[rows] = True
        else:
            assert admission is not None, "upstream needs the admission draw"
            self.ahead[rows, :2] = admission
            self.ahead[rows, 2:] = tail[:, 2:1 + A]
            self.forcing[rows] = False


@dataclasses.dataclass(frozen=True, slots=True)
class StepOutput:
    """What one tick produced for rows 0..B-1."""

    emitted: torch.Tensor
    """[B, 9] text id and agent cb0..7 of the frame to play now."""
    text_logits: torch.Tensor
    """[B, text_card] fp32."""
    audio_logits: torch.Tensor
    """[B, 8, card] fp32, depformer steps 0..7."""
    fed: torch.Tensor
    """[B, 17] the column each row fed at its position: a session's history (a handover rebuilds
    its KV ring from it)."""


class Draw(Protocol):
    """Tokens of one draw of a tick: stream 0 is text, 1..8 agent cb0..7; logits [B, V] -> [B]."""

    def __call__(self, logits: torch.Tensor, stream: int) -> torch.Tensor: ...


def draw_cards(text_card: int, card: int) -> tuple[int, ...]:
    """The token ids each of a tick's draws is over: text, then agent cb0..7."""
    return (text_card,) + (card,) * A


def sampled_draws(sample: sampling.Sampling, key: torch.Tensor, column: torch.Tensor, text_card: int,
                  card: int, lanes: sampling.Lanes | None = None) -> Draw:
    """The served draws of one tick for rows with sampling `key` and drawn `column` [B]: greedy, or
    the race. With the engine's `lanes` (off the CPU) the noise of every id of all nine draws is
    hashed at once and each draw's race runs on it (`kernels.noise`, `kernels.race`: one kernel
    each where fused); without, each draw hashes its candidates only (`sampling.races`)."""
    if sample.greedy:
        return lambda logits, stream: sampling.draw(logits, greedy=True, temperature=1.0, top_k=1, race=None)
    how = [(sample.text_temperature, sample.text_top_k)] + [(sample.audio_temperature, sample.audio_top_k)] * A
    if lanes is not None:
        noise = lanes.split(kernels.lane_noise(key, column, lanes))
        return lambda logits, stream: kernels.race_draw(logits, noise[stream], how[stream][1], how[stream][0])
    races = sampling.races(key, column, draw_cards(text_card, card))
    return lambda logits, stream: sampling.draw(logits, greedy=False, temperature=how[stream][0],
                                                top_k=how[stream][1], race=races[stream])


def speak(state: TokenState, text: torch.Tensor) -> torch.Tensor:
    """[B] the text ids rows 0..B-1 emit: the draw, or where it is a word and commentary is left,
    the next commentary id (which advances `say_at`)."""
    B = text.shape[0]
    at = state.say_at[:B]
    word = (text != SILENT[0]) & (text != SILENT[1]) & (at < state.say_len[:B])
    said = state.say[:B].gather(1, at.clamp(max=SAY_TOKENS - 1)[:, None])[:, 0]
    at.add_(word.long())
    return torch.where(word, said, text)


def fed_column(state: TokenState, user: torch.Tensor, schedule: prompt.Schedule) -> torch.Tensor:
    """[B, 17] the column each row feeds this tick; `user` [B, 8] is this tick's caller codes."""
    B = user.shape[0]
    if schedule is prompt.Schedule.UPSTREAM:
        return torch.cat([state.ahead[:B], user[:, :1], state.u1[:B, 1:]], dim=1)
    return torch.cat([state.ahead[:B], state.u1[:B, :1], state.u2[:B, 1:]], dim=1)


def draw_agent(h: torch.Tensor, text: torch.Tensor, dep: depformer.Depformer, draw: Draw,
               forcing: torch.Tensor | None = None, forced: torch.Tensor | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Depformer steps 0..7 for B rows after the `text` draw: ([B, 9] the frame's tokens, text
    then agent cb0..7; [B, 8, card] logits).

    Rows with `forcing` [B] take agent cb1..7 from `forced` [B, 7] instead of their draws; a forced
    token still runs its step (its logits are reported) and becomes the next step's input.
    """
    kv = dep.new_frame(h.shape[0])
    prev = text
    tokens, logits = [text], []
    for s in range(A):
        lg = dep.step(s, h, prev, kv)
        prev = draw(lg, 1 + s)
        if s and forcing is not None and forced is not None:
            prev = torch.where(forcing, forced[:, s - 1], prev)
        tokens.append(prev)
        logits.append(lg)
    return torch.stack(tokens, 1), torch.stack(logits, 1)


def live_step(temp: temporal.Temporal, dep: depformer.Depformer, pool: ring.KVPool, state: TokenState,
              user: torch.Tensor, schedule: prompt.Schedule, draw: Draw, plan: ring.Plan | None = None,
              ) -> StepOutput:
    """One tick of the sessions in slots 0..B-1 (B = user.shape[0]); advances their state.

    user: [B, 8] caller codes Mimi encoded this tick; draw: the tick's draws (`sampled_draws` of
    these rows' seeds and column pos+1); plan: the attention plan (`ring.live_plan` of these
    rows' positions; default `masked` over the whole ring).
    """
    B = user.shape[0]
    assert user.shape == (B, A), f"user codes are {tuple(user.shape)}, expected [B, {A}]"
    pos = state.pos[:B]
    fed = fed_column(state, user, schedule)
    h = temp.step(temp.embed(fed), pos, pool, plan)
    text_logits = temp.text_logits(h)
    text = speak(state, draw(text_logits, 0))
    forcing = state.forcing[:B] if schedule is prompt.Schedule.REFERENCE else None
    drawn, audio_logits = draw_agent(h, text, dep, draw, forcing, state.forced[:B])
    emitted = torch.cat([state.ahead[:B, :2], drawn[:, 2:]], dim=1)
    state.ahead[:B] = drawn
    if schedule is prompt.Schedule.REFERENCE:  # only `reference` feeds the codes of two ticks ago
        state.u2[:B] = state.u1[:B]
    state.u1[:B] = user
    if forcing is not None:
        state.forcing[:B] = False
    state.pos[:B].add_(1)
    return StepOutput(emitted, text_logits, audio_logits, fed)
