"""A Kyutai Moshi checkpoint served by the engine, golden against moshi's own `LMGen`.

The LM is built by moshi's own loader from moshi's own kwargs (`_lm_kwargs` shrunk to the tiny
widths, with a 400-entry text vocabulary: nothing may assume PersonaPlex's 32000), saved with its
`config.json` next to the tiny directory's Mimi and tokenizer, and no voices: a Moshi layout. The
engine serves it through channel, `Line`, jitter and Mimi, greedy, context 40 (past the window);
moshi's loader reads the same file back for `LMGen`, and upstream's Mimi encodes the frames the
engine heard. Tokens exact (engine tick k = `LMGen` call k+1), PCM within spec §6.6's 1e-4, with
its margin precondition. Two sessions, the second admitted 5 ticks later with another caller.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from liveplex.personaplex import config, prompt, tokenizer
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint
from tests.engine_pod import harness
from tests.personaplex import moshi_reference, upstream

pytestmark = pytest.mark.timeout(300)

TICKS = 40
LATE = 5
A_AUDIO, C_AUDIO = 16, 20
"""Caller-audio seeds whose `LMGen` runs clear the margin preconditions."""
TEXT_CARD = 400


@pytest.fixture(scope="module")
def moshi_dir(tmp_path_factory, tiny_dir):
    directory = tmp_path_factory.mktemp("moshi") / "ck"
    directory.mkdir()
    for name in (mimi_checkpoint.FILE_NAME, tokenizer.FILE_NAME):
        shutil.copy(tiny_dir / name, directory / name)
    upstream.write_moshi_lm(directory, upstream.tiny_moshi_kwargs(text_card=TEXT_CARD), seed=1)
    return directory


@pytest.fixture(scope="module")
def moshi_model(moshi_dir):
    return harness.load(moshi_dir, context=40)


def test_the_moshi_layout_is_recognised_from_moshis_own_config(moshi_model):
    assert moshi_model.convention is prompt.Convention.MOSHI and moshi_model.voices == {}
    assert moshi_model.cfg.dep_steps == config.AGENT_CODEBOOKS and moshi_model.cfg.text_card == TEXT_CARD
    pod = harness.Pod(*harness.build(moshi_model, max_sessions=1))
    info = pod.inbox.info
    assert info.model == "moshi-custom" and "NATF2" in info.voices and "NATM1" in info.voices
    assert (info.max_instructions_chars, info.default_instructions) == (0, "")
    with pytest.raises(ValueError, match="a Moshi checkpoint runs only the upstream schedule"):
        harness.build(moshi_model, max_sessions=1, schedule="reference")


def test_moshi_sessions_emit_lmgens_tokens_and_audio(moshi_dir, moshi_model, reference_mimi):
    pod = harness.Pod(*harness.build(moshi_model, max_sessions=2))
    a = pod.start("NATF2", "", harness.caller_audio(A_AUDIO, TICKS))
    c = None
    for t in range(TICKS):
        if t == LATE:
            c = pod.start("NATM1", "", harness.caller_audio(C_AUDIO, TICKS))
        pod.tick()
    assert c is not None and pod.engine.running == 2
    lm = upstream.load_moshi_lm(moshi_dir)
    for call in (a, c):
        rec = moshi_reference.lmgen_run(lm, reference_mimi, torch.stack(call.heard))
        harness.assert_matches_reference(call, rec, shift=0, min_ticks=TICKS - LATE)
        assert len({tuple(t) for t in call.tokens}) > TICKS // 2  # the draws move
    assert a.tokens[LATE:] != c.tokens[: TICKS - LATE]
