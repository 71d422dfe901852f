"""The directory loader (spec personaplex §2.1, §2.5, §5.2): one call, one error naming what is wrong."""

from __future__ import annotations

import io
import shutil
import tarfile

import pytest
import safetensors.torch
import torch

from liveplex.personaplex import (
    checkpoint,
    cli,
    config,
    errors,
    mimi,
    model_dir,
    prompt,
    tokenizer,
    voices,
)
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint

MIMI_FILE = mimi_checkpoint.FILE_NAME


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pristine") / "ck"
    cli.make_tiny(directory)
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
