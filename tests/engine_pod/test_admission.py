"""Admission never makes a tick late (issue 14): a burst of newcomers into a full pod is prefilled
within the per-tick budget, chunked across ticks, while every running session keeps one frame per
tick; each newcomer starts within a bounded number of ticks, and a prompt prefilled in chunks
leaves the state a whole prefill leaves.

Tiny model, CPU fp32, greedy, context 40. A budget of ~0 ms makes every tick prefill only
`grouping.MIN_CHUNK_ROWS` rows of the queue, so the 18-row prompts split in two.
"""

from __future__ import annotations

import pytest
import torch

from liveplex.engine_pod import grouping
from liveplex.live import contract
from liveplex.personaplex import prompt
from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(300)

RUNNING, BURST, TICKS = 4, 4, 16
NO_BUDGET = 1e-6
"""ms: nothing fits, so each tick prefills the head of the queue's minimum chunk only."""


def _prompt_rows(model, voice: str) -> int:
    v = model.voices[voice]
    role = model.tokenizer.role_ids(harness.SHORT_ROLE)
    return prompt.layout(v.embeddings, v.ring_n, v.ring_next, role, prompt.Schedule.UPSTREAM).columns.shape[0]


def test_a_burst_into_a_full_pod_keeps_running_sessions_on_time_and_starts_each_newcomer_within_a_bound(tiny_model):
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=RUNNING + BURST, prefill_budget_ms=NO_BUDGET))
    running = [pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(s, 60)) for s in range(RUNNING)]
    while not all(c.pcm for c in running):
        pod.tick()
    before = [len(c.pcm) for c in running]
    voices = ["NATM1" if i % 2 else "NATF2" for i in range(BURST)]
    burst = [pod.start(v, harness.SHORT_ROLE, harness.caller_audio(10 + i, 60)) for i, v in enumerate(voices)]
    started: dict[int, int] = {}
    for tick in range(TICKS):
        pod.tick()
        for i, c in enumerate(burst):
            if i not in started and any(isinstance(o, contract.Started) for o in c.outputs):
                started[i] = tick
    for c, n in zip(running, before):  # one frame every tick, numbered without a gap
        frames = [o.frame for o in c.outputs if isinstance(o, contract.Audio)]
        assert len(frames) == n + TICKS and frames == list(range(len(frames)))
    assert pod.engine.running == RUNNING + BURST
    bound = 0
    for i, voice in enumerate(voices):
        rows = _prompt_rows(tiny_model, voice)
        assert rows > grouping.MIN_CHUNK_ROWS  # the test splits prompts
        bound += -(-rows // grouping.MIN_CHUNK_ROWS)
        assert started[i] < bound, f"newcomer {i} started in tick {started[i]}, bound {bound}"
        assert i == 0 or started[i] > started[i - 1]  # in arrival order


def _prefilled(tiny_model, budget_ms: float, end_one: bool = False) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """A pod of 4 slots with 3 sessions running, then a newcomer: its slot's KV over its prompt and
    its token state, right after the tick that completes its prefill. With 3 running the bucket is
    4, so while it is chunked a padding row runs in its slot between its chunks. `end_one`: a
    running session ends after the newcomer's first tick (its partial slot moves down)."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=4, prefill_budget_ms=budget_ms, seed=0))
    others = [pod.start("NATM1", "Hello world.", harness.caller_audio(s, 40)) for s in range(3)]
    pod.tick()
    newcomer = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(9, 40))
    pod.tick()
    if end_one:
        others[0].opened.audio.close()
    while not any(isinstance(o, contract.Started) for o in newcomer.outputs):
        pod.tick()
    slot = pod.engine.slot_of(newcomer.opened.id)
    assert slot == (2 if end_one else 3) and pod.engine.running == (3 if end_one else 4)
    pools = pod.engine.pools
    end = int(pools.tokens.pos[slot]) - 1  # the live tick just run wrote one position past the prompt
    state = [int(pools.tokens.ahead[slot, 0]), int(pools.tokens.key[slot])]
    return pools.kv.k[slot, :, :end].clone(), pools.kv.v[slot, :, :end].clone(), state


def test_a_prompt_prefilled_in_chunks_with_padding_rows_between_leaves_the_state_of_a_whole_prefill(tiny_model):
    k_chunked, v_chunked, s_chunked = _prefilled(tiny_model, NO_BUDGET)
    k_whole, v_whole, s_whole = _prefilled(tiny_model, 1e3)
    torch.testing.assert_close(k_chunked, k_whole, rtol=0, atol=1e-5)
    torch.testing.assert_close(v_chunked, v_whole, rtol=0, atol=1e-5)
    assert s_chunked == s_whole


def test_a_newcomer_partway_through_its_prefill_follows_the_free_slot_down_when_a_session_ends(tiny_model):
    k_chunked, v_chunked, s_chunked = _prefilled(tiny_model, NO_BUDGET, end_one=True)
    k_whole, v_whole, s_whole = _prefilled(tiny_model, 1e3)
    torch.testing.assert_close(k_chunked, k_whole, rtol=0, atol=1e-5)
    torch.testing.assert_close(v_chunked, v_whole, rtol=0, atol=1e-5)
    assert s_chunked == s_whole


def test_a_newcomer_whose_caller_hung_up_while_queued_is_dropped_before_more_of_its_prefill(tiny_model):
    """Its socket gone mid-prefill (the front end closes both ends), the head of the queue leaves at
    the next tick, and the newcomer behind it prefills then, not after the abandoned prompt's rows."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, prefill_budget_ms=NO_BUDGET))
    gone = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(1, 40))
    behind = pod.start("NATM1", harness.SHORT_ROLE, harness.caller_audio(2, 40))
    pod.tick()  # the head's first chunk
    assert _prompt_rows(tiny_model, "NATF2") > grouping.MIN_CHUNK_ROWS and pod.engine.waiting == 2
    gone.opened.audio.close()
    gone.opened.output.close()
    ticks = 0
    while not any(isinstance(o, contract.Started) for o in behind.outputs):
        pod.tick()
        ticks += 1
    assert ticks == -(-_prompt_rows(tiny_model, "NATM1") // grouping.MIN_CHUNK_ROWS)
    assert pod.engine.running == 1 and pod.engine.waiting == 0
