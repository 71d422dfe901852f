"""`liveplex personaplex make-tiny DIR` writes a directory that loads through `model_dir.load` and steps."""

from __future__ import annotations

import pytest
import torch

from liveplex import cli
from liveplex.personaplex import (
    config,
    model_dir,
    prefill,
    prompt,
    sampling,
    step,
    tiny_tokenizer,
    tokenizer,
)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ck") / "tiny"
    assert cli.main(["personaplex", "make-tiny", str(directory)]) == 0
    return directory


def test_make_tiny_writes_the_real_layout_with_the_shared_test_tokenizer(tiny_dir):
    assert sorted(p.name for p in tiny_dir.iterdir()) == sorted(
        ["model.safetensors", "tokenizer-e351c8d8-checkpoint125.safetensors", tokenizer.FILE_NAME, "voices"])
    # The same trainer as the tests' tokenizer, not a copy of it.
    assert (tiny_dir / tokenizer.FILE_NAME).read_bytes() == tiny_tokenizer.train(tiny_tokenizer.sample_corpus(seed=0))


@torch.no_grad()
def test_make_tiny_output_loads_through_the_directory_loader_and_steps(tiny_dir):
    model = model_dir.load(tiny_dir)
    assert model.name == "tiny" and model.cfg == config.tiny()
    assert model.lm.file_steps == 16 and model.lm.depformer.steps == 8
    assert {name: v.frames for name, v in model.voices.items()} == {"NATF2": 5, "NATM1": 7}
    assert model.max_instructions_chars == prompt.max_instructions_chars(config.tiny().context, 7) == 0
    processor = model.tokenizer.processor
    assert [processor.id_to_piece(i) for i in range(5)] == ["<unk>", "<s>", "</s>", "<pad>", "<0x00>"]

    voice, schedule, sample = model.voices["NATM1"], prompt.Schedule.UPSTREAM, sampling.Sampling()
    role = model.tokenizer.role_ids("You are a teacher.")[:10]
    p = prompt.layout(voice.embeddings, voice.ring_n, voice.ring_next, role, schedule)
    temp, dep, codec = model.lm.temporal, model.lm.depformer, model.codec
    pool, state = temp.new_pool(2), step.TokenState.allocate(2)
    prefill.admit(temp, dep, pool, state, [prefill.Newcomer(r, p, prefill.voice_prefix(temp, voice.embeddings), seed=r)
                                           for r in range(2)], schedule, sample)
    rows = codec.init_state(2).head(2)
    pcm = torch.zeros(2, codec.cfg.frame_samples)
    emitted = []
    for _ in range(config.tiny().context):  # past the window
        draw = step.sampled_draws(sample, state.key, state.pos + 1, temp.cfg.text_card, temp.cfg.card)
        out = step.live_step(temp, dep, pool, state, codec.encode_step(pcm, rows), schedule, draw)
        pcm = codec.decode_step(out.emitted[:, 1:], rows)
        assert pcm.shape == (2, 1920) and bool(torch.isfinite(pcm).all())
        emitted.append(out.emitted)
    emitted_t = torch.stack(emitted)
    assert not torch.equal(emitted_t[:, 0], emitted_t[:, 1])  # two seeds, two conversations
    assert len(set(emitted_t[:, 0, 1].tolist())) > 1  # the agent's cb0 moves
