"""The directory loader (spec personaplex §2.1, §2.5, §5.2): one call, one error naming what is wrong."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import shutil
import tarfile

import numpy as np
import pytest
import safetensors.torch
import soundfile
import torch

from liveplex.personaplex import (
    architecture,
    checkpoint,
    config,
    errors,
    mimi,
    model_dir,
    prompt,
    tiny_checkpoint,
    tokenizer,
    voices,
)
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint

MIMI_FILE = mimi_checkpoint.FILE_NAME


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pristine") / "ck"
    tiny_checkpoint.make_tiny(directory)
    return directory


@pytest.fixture
def ck(pristine, tmp_path):
    """A private copy to damage."""
    return shutil.copytree(pristine, tmp_path / "ck")


def _rewrite(path, change):
    tensors = safetensors.torch.load_file(str(path))
    change(tensors)
    safetensors.torch.save_file(tensors, str(path))


def test_every_missing_file_is_named_in_one_error(ck):
    (ck / MIMI_FILE).unlink()
    (ck / tokenizer.FILE_NAME).unlink()
    shutil.rmtree(ck / "voices")
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert len(info.value.problems) == 3
    message = str(info.value)
    assert f"`{MIMI_FILE}` is missing" in message and f"`{tokenizer.FILE_NAME}` is missing" in message
    assert "neither `voices/` nor `voices.tgz`" in message and "model.safetensors" not in message
    assert all("give" in problem for problem in info.value.problems)


def test_bad_tensors_in_both_files_are_reported_together(ck):
    _rewrite(ck / checkpoint.LM_FILE, lambda t: t.pop("text_linear.weight"))
    _rewrite(ck / MIMI_FILE, lambda t: t.update({"decoder.model.14.conv.conv.bias": torch.zeros(3)}))
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    problems = info.value.problems
    assert len(problems) == 2
    assert "model.safetensors: `text_linear.weight` is missing, expected shape [32000, 64]" in problems
    assert f"{MIMI_FILE}: `decoder.model.14.conv.conv.bias` has shape [3], expected [1]" in problems


def test_a_damaged_lm_is_checked_against_the_closest_architecture(ck):
    _rewrite(ck / checkpoint.LM_FILE, lambda t: t.update({"text_emb.weight": torch.zeros(32001, 80)}))
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert info.value.problems == ("model.safetensors: `text_emb.weight` has shape [32001, 80], expected [32001, 64]",)


def test_an_unreadable_tokenizer_names_the_file(ck):
    (ck / tokenizer.FILE_NAME).write_bytes(b"not a sentencepiece model")
    with pytest.raises(errors.CheckpointError, match=f"{tokenizer.FILE_NAME}: not a readable SentencePiece model"):
        model_dir.load(ck)


def test_voice_errors_share_the_package_root_and_name_the_file(ck):
    (ck / "voices" / "NATM1.pt").write_bytes(b"junk")
    with pytest.raises(errors.CheckpointError, match="NATM1.pt: not a readable torch.save zip file") as info:
        model_dir.load(ck)
    assert isinstance(info.value, voices.VoiceError)
    assert issubclass(mimi.MimiCheckpointError, errors.CheckpointError)


def test_voices_tgz_is_read_when_there_is_no_voices_folder(ck):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(ck / "voices" / "NATF2.pt", arcname="voices/NATF2.pt")
    shutil.rmtree(ck / "voices")
    (ck / "voices.tgz").write_bytes(buffer.getvalue())
    assert list(model_dir.load(ck).voices) == ["NATF2"]


def test_the_context_is_a_serving_choice_and_sets_the_prompt_limit(ck):
    model = model_dir.load(ck, context=3000)
    assert model.cfg == config.tiny().with_context(3000)
    assert model.lm.temporal.new_pool(1).context == 3000
    assert model.max_instructions_chars == prompt.max_instructions_chars(3000, 7) == (3000 - 15 - 7) // 4 - 18


def test_a_voice_that_leaves_no_room_for_a_prompt_is_refused(ck):
    # NATM1 has 7 frames: a context of 20 holds at most 20 - 14 = 6.
    refused = "voice 'NATM1': N = 7 frames leaves no room .* context of 20 .at most 6"
    with pytest.raises(voices.VoiceError, match=refused):
        model_dir.load(ck, context=20)
    assert model_dir.load(ck, context=21).max_instructions_chars == 0


def test_bf16_and_16_resident_steps(ck):
    model = model_dir.load(ck, dtype=torch.bfloat16, steps=16)
    assert model.lm.depformer.steps == 16
    assert model.lm.temporal.text_linear.weight.dtype == torch.bfloat16
    assert next(model.codec.parameters()).dtype == torch.float32  # Mimi stays fp32


def test_every_problem_of_the_lm_is_listed_at_once_the_depformer_layout_included(ck):
    def damage(t):
        t["depformer.layers.0.self_attn.in_proj_weight"] = t["depformer.layers.0.self_attn.in_proj_weight"][:96]
        del t["text_emb.weight"]
        t["transformer.layers.1.norm2.alpha"] = torch.ones(1, 1, 3)
    _rewrite(ck / checkpoint.LM_FILE, damage)
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert info.value.problems == (
        "model.safetensors: `text_emb.weight` is missing, expected shape [32001, 64]",
        "model.safetensors: `transformer.layers.1.norm2.alpha` has shape [1, 1, 3], expected [1, 1, 64]",
        "model.safetensors: `depformer.layers.0.self_attn.in_proj_weight` has shape [96, 32], expected [1536, 32]",
    )


def _config(directory, kwargs):
    (directory / architecture.CONFIG_FILE).write_text(json.dumps(kwargs))


def test_config_json_is_read_and_checked_against_the_tensors(ck, caplog):
    kwargs = architecture.to_moshi_kwargs(config.tiny()) | {"lm_gen_config": {"temp": 0.6}, "new_key": 1}
    _config(ck, kwargs)
    with caplog.at_level(logging.WARNING, logger="liveplex.personaplex.model_dir"):
        assert model_dir.load(ck).cfg == config.tiny()
    assert [r.notes for r in caplog.records if "assumed or ignored" in r.getMessage()] == [
        ["config.json keys ignored: new_key"]]
    _config(ck, kwargs | {"num_layers": 3, "moshi_name": "moshi.safetensors", "gating": "none"})
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert info.value.problems == (
        "config.json: `moshi_name` names `moshi.safetensors`; liveplex reads `model.safetensors` (rename the file)",
        "config.json: `gating` is 'none'; liveplex serves only 'silu'",
        "config.json: `num_layers` gives num_layers 3, but the tensors have 2 "
        "(`transformer.layers.1.self_attn.out_proj.weight` is [64, 64]); give the tensors' value or leave "
        "`num_layers` out",
    )
    (ck / architecture.CONFIG_FILE).write_text("{not json")
    with pytest.raises(errors.CheckpointError, match="config.json: not readable JSON"):
        model_dir.load(ck)


def test_a_moshi_checkpoint_loads_without_voices_and_takes_no_prompt(tmp_path):
    tiny_checkpoint.make_tiny(tmp_path / "moshi", convention=prompt.Convention.MOSHI)
    model = model_dir.load(tmp_path / "moshi")
    assert model.convention is prompt.Convention.MOSHI and model.voices == {} and model.max_instructions_chars == 0
    assert model.cfg == dataclasses.replace(config.tiny(), dep_steps=8) and model.lm.file_steps == 8
    with pytest.raises(errors.CheckpointError, match="a Moshi checkpoint takes no voice prompts"):
        model_dir.load(tmp_path / "moshi", custom_voices_dir=tmp_path)


def test_an_8_step_file_with_voices_is_served_as_personaplex_with_a_warning(ck, lm_checkpoint, caplog):
    from tests.personaplex import upstream

    tensors = safetensors.torch.load_file(str(ck / checkpoint.LM_FILE))
    safetensors.torch.save_file(upstream.eight_step(tensors, config.tiny()), str(ck / checkpoint.LM_FILE))
    with caplog.at_level(logging.WARNING, logger="liveplex.personaplex.model_dir"):
        model = model_dir.load(ck)
    assert model.convention is prompt.Convention.PERSONAPLEX and model.cfg.dep_steps == 8
    assert any("may not be a PersonaPlex checkpoint (D2)" in r.getMessage() for r in caplog.records)
    shutil.rmtree(ck / "voices")
    assert model_dir.load(ck).convention is prompt.Convention.MOSHI


def test_another_text_vocabulary_serves_wav_voices_with_its_own_init_token(ck, tmp_path):
    """The text INIT id is the checkpoint's vocabulary size (400 here), not PersonaPlex's 32000. A
    custom size takes Kyutai's 3000-position window unless told otherwise."""
    cfg = dataclasses.replace(config.tiny(), text_card=400, context=3000)
    lm = checkpoint.random_lm(cfg, seed=3, steps=16)
    safetensors.torch.save_file(checkpoint.lm_state(lm), str(ck / checkpoint.LM_FILE))
    t = np.arange(24000) / 24000
    soundfile.write(ck / "voices" / "Mine.wav", 0.3 * np.sin(2 * np.pi * 220 * t), 24000)
    model = model_dir.load(ck)
    assert model.cfg == cfg and model.name == "custom"
    voice = model.voices["Mine"]
    init = model.lm.temporal.embed(torch.tensor([cfg.init_column]))
    assert torch.equal(voice.embeddings[0], init[0])  # column 0 of a .wav voice is all INIT


def test_an_audio_vocabulary_other_than_mimis_is_refused(ck):
    cfg = dataclasses.replace(config.tiny(), card=1024)
    safetensors.torch.save_file(checkpoint.lm_state(checkpoint.random_lm(cfg, seed=0, steps=16)),
                                str(ck / checkpoint.LM_FILE))
    with pytest.raises(errors.CheckpointError, match="audio vocabulary 1024 .`card`. differs from Mimi's 2048"):
        model_dir.load(ck)


# --- a checkpoint at a size no named config has, in NVIDIA's layout (no config.json) --------------------

NARROW = dataclasses.replace(config.tiny(), dim=32, num_heads=4, hidden=config.gated_hidden(32, 132), dep_dim=16,
                             dep_num_heads=2, dep_hidden=config.gated_hidden(16, 66), context=3000)
"""Widths no named LM has and no Kyutai head width splits (32 of 128, 16 of 64): its heads must be given."""
WIDE_FFN = dataclasses.replace(mimi.tiny_config(), dim_feedforward=128)
"""A Mimi no named codec is: tiny's widths, a wider FFN."""


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    directory = tmp_path_factory.mktemp("narrow") / "ck"
    tiny_checkpoint.make_tiny(directory, lm=NARROW, codec=WIDE_FFN)
    return directory


def test_heads_no_tensor_shows_are_asked_for_and_a_partial_config_json_gives_just_them(narrow, tmp_path):
    ck = shutil.copytree(narrow, tmp_path / "ck")
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert info.value.problems == (  # and nothing about Mimi, which its own shapes describe
        "model.safetensors: cannot derive `num_heads` for width 32 (not a multiple of 128); give `num_heads` in "
        "config.json",
        "model.safetensors: cannot derive `dep_num_heads` for width 16 (not a multiple of 64); give "
        "`depformer_num_heads` in config.json",
    )
    _config(ck, {"num_heads": 4, "depformer_num_heads": 2})  # just what was asked: the rest derived as before
    model = model_dir.load(ck)
    assert model.cfg == NARROW and model.name == "custom"
    assert model.codec.cfg == WIDE_FFN


def test_mimi_is_derived_the_same_with_or_without_config_json(narrow, ck, tmp_path):
    for directory, lm in ((ck, config.tiny()), (shutil.copytree(narrow, tmp_path / "narrow"), NARROW)):
        codecs = []
        for kwargs in (None, {"num_heads": lm.num_heads, "depformer_num_heads": lm.dep_num_heads},
                       architecture.to_moshi_kwargs(lm)):
            if kwargs is not None:
                _config(directory, kwargs)
            elif lm is NARROW:
                continue  # its heads must be given
            codecs.append(model_dir.load(directory).codec.cfg)
        assert codecs == [codecs[0]] * len(codecs) and codecs[0] in (mimi.tiny_config(), WIDE_FFN)


def test_every_refusal_says_what_to_give_for_each_problem(narrow, tmp_path):
    ck = shutil.copytree(narrow, tmp_path / "ck")
    _config(ck, {"num_heads": 3, "depformer_num_heads": 2, "num_layers": 3})
    _rewrite(ck / MIMI_FILE, lambda t: t.update({"decoder.model.14.conv.conv.bias": torch.zeros(3)}))
    with pytest.raises(errors.CheckpointError) as info:
        model_dir.load(ck)
    assert info.value.problems == (
        "config.json: `num_layers` gives num_layers 3, but the tensors have 2 (`transformer.layers.1.self_attn."
        "out_proj.weight` is [32, 32]); give the tensors' value or leave `num_layers` out",
        "model.safetensors: 3 heads (`num_heads`) do not split width 32 into even head widths; give `num_heads` in "
        "config.json as one of [1, 2, 4, 8, 16]",
        f"{MIMI_FILE}: `decoder.model.14.conv.conv.bias` has shape [3], expected [1]",
    )
