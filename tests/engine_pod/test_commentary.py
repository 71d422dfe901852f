"""`session.commentary.append` on PersonaPlex (issue 21): the text the caller's app asks the agent
to say constrains the model's text stream. Where the model draws a word while commentary is left,
the next commentary id is taken instead, so the ids appear, in order, in the text stream, at the
ticks the model chose to speak; where it draws PAD or end-of-padding it stays silent.

Tiny model, CPU fp32, greedy, one session run twice from the same seed: once plain, once with the
commentary. Until the commentary arrives the two text streams are identical.
"""

from __future__ import annotations

import pytest
import torch

from liveplex.engine_pod.settings import MAX_COMMENTARY_PIECES
from liveplex.personaplex import step
from tests.engine_pod import harness

pytestmark = pytest.mark.timeout(300)

TEXT = "hello there, how are you"
AFTER = 3
"""Ticks the session runs before the commentary is sent."""


def _run(tiny_model, commentary: str | None, ticks: int = 40, words: int | None = None) -> tuple[harness.Call, int]:
    """The call, and how many of its ticks ran before the commentary was sent (the prompt may
    take more than one tick on a loaded machine: the prefill budget is measured). With `words`,
    it stops once that many words were drawn after the commentary (at most `ticks` ticks)."""
    pod = harness.Pod(*harness.build(tiny_model, max_sessions=2, seed=7))
    call = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(5, ticks + 4))
    sent = 0
    for tick in range(ticks):
        if tick == AFTER and commentary is not None:
            call.opened.audio.say(commentary)
            sent = len(call.tokens)
        pod.tick()
        if words is not None and tick >= AFTER and len(_spoken(call, sent)) >= words:
            break
    return call, sent


def _spoken(call: harness.Call, sent: int) -> list[int]:
    return [t[0] for t in call.tokens[sent:] if t[0] not in step.SILENT]


def test_commentary_ids_are_said_in_order_where_the_model_chose_to_speak(tiny_model):
    (plain, _), (said, sent) = _run(tiny_model, None), _run(tiny_model, TEXT)
    ids = tiny_model.tokenizer.encode(TEXT)
    assert ids and not set(ids) & set(step.SILENT)
    drawn = [t[0] for t in said.tokens]
    assert drawn[:sent] == [t[0] for t in plain.tokens][:sent]  # greedy: the same session until then
    spoken = [t for t in drawn[sent:] if t not in step.SILENT]
    assert spoken[:len(ids)] == ids, "the commentary's ids, in order, are the first words drawn after it"
    assert len(said.text) > 0 and "hello" in "".join(d for _, d in said.text)


def test_commentary_longer_than_a_slot_row_is_said_piece_by_piece(tiny_model):
    text = " ".join(["hello"] * (step.SAY_TOKENS + 20))
    ids = tiny_model.tokenizer.encode(text)
    assert len(ids) > step.SAY_TOKENS
    call, sent = _run(tiny_model, text, ticks=2 * len(ids) + 10, words=len(ids))
    assert _spoken(call, sent)[:len(ids)] == ids


def test_the_waiting_commentary_is_bounded(tiny_model):
    eng, handle, inbox = harness.build(tiny_model, max_sessions=1)
    pod = harness.Pod(eng, handle, inbox)
    call = pod.start("NATF2", harness.SHORT_ROLE, harness.caller_audio(5, 8))
    pod.tick()
    for _ in range(MAX_COMMENTARY_PIECES + 5):
        call.opened.audio.say(" ".join(["hello"] * step.SAY_TOKENS))
    pod.tick()
    [running] = eng._groups[0].rows  # one piece loaded into the slot, the rest waiting, the overflow dropped
    assert (running.loaded, len(running.waiting)) == (step.SAY_TOKENS, MAX_COMMENTARY_PIECES - 1)


def test_speak_replaces_words_only_and_advances_each_row_on_its_own():
    """`step.speak` directly: rows 0 and 1 have commentary [7, 8]; row 2 has none. A PAD or
    end-of-padding draw stays silent, a word draw takes the next id, and a row that has said all
    of it draws freely again."""
    state = step.TokenState.allocate(3)
    state.load_commentary(0, [7, 8])
    state.load_commentary(1, [7, 8])
    ticks = [([3, 50, 51], [3, 7, 51]), ([60, 0, 52], [7, 0, 52]), ([61, 62, 3], [8, 8, 3]),
             ([63, 64, 53], [63, 64, 53])]
    for drawn, spoken in ticks:
        assert step.speak(state, torch.tensor(drawn)).tolist() == spoken
    assert state.say_at.tolist() == [2, 2, 0]
