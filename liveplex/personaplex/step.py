"""The live step (spec personaplex §3.4): one tick of every session in slots 0..B-1, batched.

Per-slot token state after the prompt is enough for both schedules:

| field     | shape  | meaning                                                                  |
|-----------|--------|--------------------------------------------------------------------------|
| `pos`     | [S]    | position of the row this tick runs                                       |
| `ahead`   | [S, 9] | text and agent cb0..7 of column `pos`, drawn at the previous tick        |
| `u1`,`u2` | [S, 8] | the caller codes of the previous tick and of the tick before             |
| `forced`  | [S, 7] | agent cb1..7 teacher-forced while `forcing` (first reference tick only)  |
| `seed`    | [S]    | the session's sampling seed                                              |

A tick feeds `ahead ++ user_part`, draws the text and agent codebooks of column pos+1, and emits
`[ahead[0], ahead[1], a[1..7]]`: the text id and agent frame (cb0 of column pos, cb1..7 of pos+1).
No host synchronisation, no clock, no globals: the engine runs it inside a CUDA graph.
"""

from __future__ import annotations

import dataclasses

import torch

from liveplex.personaplex import config, depformer, prompt, ring, sampling, temporal

A = config.AGENT_CODEBOOKS


@dataclasses.dataclass(slots=True)
class TokenState:
    """Token state of `slots` sessions, preallocated; rows change only by `start` and `live_step`."""

    pos: torch.Tensor
    ahead: torch.Tensor
    u1: torch.Tensor
    u2: torch.Tensor
    forced: torch.Tensor
    forcing: torch.Tensor
    seed: torch.Tensor

    @classmethod
    def allocate(cls, slots: int, device: torch.device | str = "cpu") -> TokenState:
        def z(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.long, device=device)
        return cls(z(slots), z(slots, 1 + A), z(slots, A), z(slots, A), z(slots, A - 1),
                   torch.zeros(slots, dtype=torch.bool, device=device), z(slots))

    def start(self, slot: int, schedule: prompt.Schedule, position: int, seed: int, tail: torch.Tensor,
              admission: tuple[int, int] | None = None) -> None:
        """Set a newcomer's row to §3.4's start state; `tail` is its prompt's (`Prompt.tail`).

        `admission` is the upstream admission draw (text, agent cb0 of column P): the agent's other
        codes and the user's previous ones come from the tail. `reference` starts from the tail
        column itself, with agent cb1..7 forced to the tail's on its first tick.
        """
        self.pos[slot] = position
        self.u1[slot] = tail[1 + A:]
        self.u2[slot] = tail[1 + A:]
        self.seed[slot] = seed
        if schedule is prompt.Schedule.REFERENCE:
            self.ahead[slot] = tail[:1 + A]
            self.forced[slot] = tail[2:1 + A]
            self.forcing[slot] = True
        else:
            assert admission is not None, "upstream needs the admission draw"
            self.ahead[slot] = torch.tensor([admission[0], admission[1], *tail[2:1 + A].tolist()])
            self.forcing[slot] = False

    def copy_slot(self, src: int, dst: int) -> None:
        for t in (self.pos, self.ahead, self.u1, self.u2, self.forced, self.forcing, self.seed):
            t[dst] = t[src]


@dataclasses.dataclass(frozen=True, slots=True)
class StepOutput:
    """What one tick produced for rows 0..B-1."""

    emitted: torch.Tensor
    """[B, 9] text id and agent cb0..7 of the frame to play now."""
    fed: torch.Tensor
    """[B, 17] the column fed to the temporal transformer."""
    text_logits: torch.Tensor
    """[B, text_card] fp32."""
    audio_logits: torch.Tensor
    """[B, 8, card] fp32, depformer steps 0..7."""
    drawn: torch.Tensor
    """[B, 9] text and agent cb0..7 of column pos+1 (after forcing)."""


def fed_column(state: TokenState, user: torch.Tensor, schedule: prompt.Schedule) -> torch.Tensor:
    """[B, 17] the column each row feeds this tick; `user` [B, 8] is this tick's caller codes."""
    B = user.shape[0]
    if schedule is prompt.Schedule.UPSTREAM:
        user_part = torch.cat([user[:, :1], state.u1[:B, 1:]], dim=1)
    else:
        user_part = torch.cat([state.u1[:B, :1], state.u2[:B, 1:]], dim=1)
    return torch.cat([state.ahead[:B], user_part], dim=1)


def draw_agent(h: torch.Tensor, text: torch.Tensor, dep: depformer.Depformer, column: torch.Tensor,
               seed: torch.Tensor, sample: sampling.Sampling, forced: torch.Tensor,
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Depformer steps 0..7 for B rows: ([B, 8] tokens, [B, 8, card] logits).

    forced: [B, 8] tokens to teacher-force per step, -1 to draw. A forced token still runs its
    step (its logits are reported) and becomes the next step's input.
    """
    kv = dep.new_frame()
    prev = text
    tokens, logits = [], []
    for s in range(A):
        lg = dep.step(s, h, prev, kv)
        got = sampling.draw(lg, greedy=sample.greedy, temperature=sample.audio_temperature,
                            top_k=sample.audio_top_k, seed=seed, column=column, stream=1 + s)
        prev = torch.where(forced[:, s] >= 0, forced[:, s], got)
        tokens.append(prev)
        logits.append(lg)
    return torch.stack(tokens, 1), torch.stack(logits, 1)


def draw_text(h: torch.Tensor, temp: temporal.Temporal, column: torch.Tensor, seed: torch.Tensor,
              sample: sampling.Sampling) -> tuple[torch.Tensor, torch.Tensor]:
    """Text head and draw for B rows: ([B] ids, [B, text_card] logits)."""
    logits = temp.text_logits(h)
    return sampling.draw(logits, greedy=sample.greedy, temperature=sample.text_temperature,
                         top_k=sample.text_top_k, seed=seed, column=column, stream=0), logits


def live_step(temp: temporal.Temporal, dep: depformer.Depformer, pool: ring.KVPool, state: TokenState,
              user: torch.Tensor, schedule: prompt.Schedule, sample: sampling.Sampling,
              force_draws: torch.Tensor | None = None) -> StepOutput:
    """One tick of the sessions in slots 0..B-1 (B = user.shape[0]); advances their state.

    user: [B, 8] caller codes Mimi encoded this tick. force_draws: [B, 9] text and agent cb0..7
    to force, -1 to draw (a test hook; None in production).
    """
    B = user.shape[0]
    assert user.shape == (B, A), f"user codes are {tuple(user.shape)}, expected [B, {A}]"
    fed = fed_column(state, user, schedule)
    pos = state.pos[:B]
    h = temp.step(temp.embed(fed), pos, pool)
    column, seed = pos + 1, state.seed[:B]
    if force_draws is None:
        force_draws = torch.full((B, 1 + A), -1, dtype=torch.long, device=user.device)
    text, text_logits = draw_text(h, temp, column, seed, sample)
    text = torch.where(force_draws[:, 0] >= 0, force_draws[:, 0], text)
    forced = force_draws[:, 1:].clone()
    teacher = torch.cat([torch.full_like(forced[:, :1], -1), state.forced[:B]], dim=1)
    forced = torch.where(state.forcing[:B, None] & (forced < 0), teacher, forced)
    agent, audio_logits = draw_agent(h, text, dep, column, seed, sample, forced)
    emitted = torch.cat([state.ahead[:B, :2], agent[:, 1:]], dim=1)
    drawn = torch.cat([text[:, None], agent], dim=1)
    state.ahead[:B] = drawn
    state.u2[:B] = state.u1[:B]
    state.u1[:B] = user
    state.forcing[:B] = False
    state.pos[:B] = pos + 1
    return StepOutput(emitted, fed, text_logits, audio_logits, drawn)
