"""Prompt layout, start states, the role-prompt limit and the ragged prefill (spec §6.9, §6.10)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from liveplex.personaplex import (
    checkpoint,
    config,
    prefill,
    prompt,
    sampling,
    step,
    temporal,
)
from tests.personaplex import sessions


def _layout(N: int, L: int, schedule: prompt.Schedule):
    spec = sessions.make_spec(8, 1, voice_frames=N, role_len=L, seed=N * 100 + L)
    return spec, prompt.layout(spec.voice, *sessions.ring_columns(spec), spec.role_ids, schedule)


@given(N=st.integers(1, 60), L=st.integers(0, 40))
def test_prompt_rows_follow_the_layout(N, L):
    spec, ref = _layout(N, L, prompt.Schedule.REFERENCE)
    _, up = _layout(N, L, prompt.Schedule.UPSTREAM)
    assert ref.columns.shape[0] == 12 + L and up.columns.shape[0] == 13 + L
    assert torch.equal(up.columns[:-1], ref.columns)
    assert ref.total == up.total == N + 13 + L
    assert torch.equal(ref.columns[0], spec.cache[0, :, N % 4])
    delayed = torch.tensor(config.DELAYS, dtype=torch.bool)
    assert torch.equal(ref.columns[1][delayed], spec.cache[0, :, (N + 1) % 4][delayed])
    assert torch.equal(ref.columns[1][~delayed], prompt.silence_column()[~delayed])
    assert up.columns[7: 7 + L, 0].tolist() == spec.role_ids  # column N+7+i is row 7+i
    assert bool((up.columns[7: 7 + L, 1:] == prompt.silence_column()[1:]).all())
    others = torch.cat([up.columns[2:7], up.columns[7 + L:]])
    assert bool((others == prompt.silence_column()).all())
    assert prompt.start_position(ref, prompt.Schedule.REFERENCE) == N + 12 + L
    assert prompt.start_position(up, prompt.Schedule.UPSTREAM) == N + 13 + L


def test_reference_start_state_is_the_silence_column_with_forced_acoustics():
    state = step.TokenState.allocate(2)
    state.start(slice(1, 2), prompt.Schedule.REFERENCE, torch.tensor([30]), torch.tensor([5]),
                prompt.silence_column()[None])
    assert state.ahead[1].tolist() == [config.TEXT_PAD, *config.SILENCE]
    assert state.u1[1].tolist() == state.u2[1].tolist() == list(config.SINE)
    assert state.forcing[1] and state.forced[1].tolist() == list(config.SILENCE[1:])
    assert state.pos[1] == 30 and state.ahead[0].tolist() == [0] * 9  # other row untouched


def test_the_upstream_start_keeps_the_admission_draw_and_the_silence_after_the_prompt():
    state = step.TokenState.allocate(1)
    state.start(slice(0, 1), prompt.Schedule.UPSTREAM, torch.tensor([30]), torch.tensor([5]),
                prompt.silence_column()[None], torch.tensor([[7, 9]]))
    assert state.ahead[0].tolist() == [7, 9, *config.SILENCE[1:]] and not state.forcing[0]
    assert state.u1[0].tolist() == list(config.SINE)


def test_moshi_prompts_nothing_and_starts_live_at_position_1_after_an_all_init_column():
    """moshi's LMGen: call 0 feeds the all-INIT column 0 (prefilled here) and draws column 1's text
    and agent cb0 (the admission draw); column 1's delayed streams are INIT, so the first live tick
    (LMGen's call 1) feeds [text, cb0, INIT x 7, caller cb0, INIT x 7]."""
    cfg = dataclasses.replace(config.tiny(), text_card=400)
    p = prompt.bare(cfg.init_column, cfg.dim)
    assert p.voice.shape == (0, cfg.dim) and p.role_tokens == 0
    assert p.columns.tolist() == [[400] + [2048] * 16]
    assert prompt.start_position(p, prompt.Schedule.UPSTREAM) == p.total == 1
    state = step.TokenState.allocate(1)
    state.start(slice(0, 1), prompt.Schedule.UPSTREAM, torch.tensor([1]), torch.tensor([5]), p.tail[None],
                torch.tensor([[7, 9]]))
    user = torch.tensor([[11, 12, 13, 14, 15, 16, 17, 18]])
    fed = step.fed_column(state, user, prompt.Schedule.UPSTREAM)
    assert fed[0].tolist() == [7, 9, *[2048] * 7, 11, *[2048] * 7]


@given(N=st.integers(1, 250), n=st.integers(0, 3000))
def test_any_allowed_prompt_fits_the_window(N, n):
    """Worst case tokenization (4 byte pieces per character, 18 wrap characters, one word-start
    piece): N + 12 + L <= context - 2 for every text within the limit (D5). An empty text is not
    wrapped (L = 0); a voice that does not fit on its own is refused at startup, not here."""
    for context in (100, 375, 1000, 3000):
        if N + 12 > context - 2:
            continue
        limit = prompt.max_instructions_chars(context, N)
        if n <= limit:
            L = 4 * (n + 18) + 1 if n else 0
            assert N + 12 + L <= context - 2


def test_the_real_limit_is_715_for_a_50_frame_voice_and_665_for_250():
    assert prompt.max_instructions_chars(3000, 50) == 715
    assert prompt.max_instructions_chars(3000, 250) == 665
    assert prompt.max_instructions_chars(40, 7) == 0


@pytest.fixture(scope="module")
def tiny_lm(lm_checkpoint):
    return checkpoint.load_lm(lm_checkpoint.path, lm_checkpoint.cfg, steps=8)


@settings(max_examples=20, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 8)), min_size=1, max_size=4))
def test_ragged_prefill_gives_each_newcomer_what_it_gets_alone(tiny_lm, shapes):
    temp, dep = tiny_lm.temporal, tiny_lm.depformer
    sample = sampling.Sampling(greedy=True)
    specs = [sessions.make_spec(temp.cfg.dim, 1, N, L, seed=i) for i, (N, L) in enumerate(shapes)]

    def newcomer(slot, spec):
        p = prompt.layout(spec.voice, *sessions.ring_columns(spec), spec.role_ids, prompt.Schedule.UPSTREAM)
        return prefill.Newcomer(slot, p, prefill.voice_prefix(temp, spec.voice), spec.seed)

    pool, state = temp.new_pool(len(specs)), step.TokenState.allocate(len(specs))
    together = prefill.admit(temp, dep, pool, state, [newcomer(i, s) for i, s in enumerate(specs)],
                             prompt.Schedule.UPSTREAM, sample)
    for i, spec in enumerate(specs):
        p1, s1 = temp.new_pool(1), step.TokenState.allocate(1)
        alone = prefill.admit(temp, dep, p1, s1, [newcomer(0, spec)], prompt.Schedule.UPSTREAM, sample)
        torch.testing.assert_close(together[i], alone[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(pool.k[i], p1.k[0], rtol=0, atol=1e-5)
        torch.testing.assert_close(pool.v[i], p1.v[0], rtol=0, atol=1e-5)
        assert torch.equal(state.ahead[i], s1.ahead[0]) and state.pos[i] == s1.pos[0]


def test_voice_prefix_equals_running_the_embeddings_in_place(tiny_lm):
    temp = tiny_lm.temporal
    voice = torch.randn(6, temp.cfg.dim, generator=torch.Generator().manual_seed(3))
    prefix = prefill.voice_prefix(temp, voice)
    pool = temp.new_pool(1)
    temp.forward_rows(voice, [temporal.Segment(0, 0, 6)], pool)
    assert prefix.frames == 6
    assert torch.equal(prefix.kv, pool.kv[0, :, :6])
