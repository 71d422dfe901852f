"""Mimi checkpoint loading: real key names, clear errors, random files for make-tiny (spec §2.3, §2.5)."""

from __future__ import annotations

import logging

import pytest
import safetensors.torch
import torch

from liveplex.personaplex import mimi
from liveplex.personaplex.mimi import checkpoint as mimi_checkpoint_io
from tests.personaplex import mimi_fixtures

CFG = mimi.tiny_config()
NAME = "tokenizer-e351c8d8-checkpoint125.safetensors"


@pytest.fixture(scope="module")
def random_file(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("mimi_random") / NAME
    mimi.write_random(path, CFG, seed=5)
    return path


def _rewrite(src, dst, change):
    tensors = safetensors.torch.load_file(str(src))
    change(tensors)
    safetensors.torch.save_file(tensors, str(dst))
    return dst


def test_random_file_has_real_names_and_loads_into_upstream_strictly(random_file):
    tensors = safetensors.torch.load_file(str(random_file))
    upstream = mimi_fixtures.build_upstream(CFG)
    upstream.load_state_dict(tensors, strict=True)
    rest = [k for k in tensors if k.startswith("quantizer.rvq_rest.vq.layers.") and k.endswith("embedding_sum")]
    assert len(rest) == CFG.stored_codebooks - 1
    assert tensors["downsample.conv.conv.conv.weight"].shape == (CFG.dimension, CFG.dimension, 4)
    assert tensors["upsample.convtr.convtr.convtr.weight"].shape == (CFG.dimension, 1, 4)


def test_loaded_parameters_equal_the_file_and_centroids_follow_the_buffers(random_file):
    model = mimi.load(random_file, "cpu", CFG)
    tensors = safetensors.torch.load_file(str(random_file))
    for key, value in model.state_dict().items():
        assert torch.equal(value, tensors[key]), key
    level = "quantizer.rvq_rest.vq.layers.6._codebook."
    expected = tensors[level + "embedding_sum"] / tensors[level + "cluster_usage"].clamp(min=1e-5)[:, None]
    assert torch.equal(model.quantizer._centroids[7], expected)


def test_random_file_makes_spread_codes(random_file):
    model = mimi.load(random_file, "cpu", CFG)
    state = model.init_state(1)
    audio = mimi_fixtures.caller_audio(1, 12, seed=6)
    codes = torch.stack([model.encode_step(audio[:, f * 1920:(f + 1) * 1920], state)[0] for f in range(12)])
    assert len(set(codes[:, 7].tolist())) > 1


def test_random_mimi_is_the_codec_write_random_writes(random_file):
    built, loaded = mimi.random_mimi(CFG, seed=5), mimi.load(random_file, "cpu", CFG)
    assert built.state_dict().keys() == loaded.state_dict().keys()
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in built.state_dict().items())
    assert torch.equal(built.quantizer._centroids, loaded.quantizer._centroids)


def test_real_table_matches_the_spec_counts():
    table = mimi.expected_tensors(mimi.mimi_config())
    used = sum(torch.Size(shape).numel() for shape in table.values())
    unused_codebooks = (32 - 8) * (1 + 2048 + 2048 * 256)
    assert len(table) + (32 - 8) * 3 == 318
    assert used + unused_codebooks == 96_151_393
    assert table["encoder.model.12.conv.conv.weight"] == (1024, 512, 16)
    assert table["decoder.model.2.convtr.convtr.weight"] == (1024, 512, 16)
    assert table["encoder_transformer.transformer.layers.7.self_attn.in_proj_weight"] == (1536, 512)


def test_missing_and_misshaped_tensors_are_all_named(random_file, tmp_path):
    def damage(t):
        del t["decoder.model.14.conv.conv.bias"]
        t["encoder.model.3.conv.conv.weight"] = torch.zeros(8, 4, 3)

    bad = _rewrite(random_file, tmp_path / NAME, damage)
    with pytest.raises(mimi.MimiCheckpointError) as info:
        mimi.load(bad, "cpu", CFG)
    problems = info.value.problems
    assert len(problems) == 2
    assert any(NAME in p and "`decoder.model.14.conv.conv.bias` is missing" in p for p in problems)
    assert any("`encoder.model.3.conv.conv.weight` has shape [8, 4, 3], expected [8, 4, 8]" in p for p in problems)


def test_a_non_float_tensor_is_refused(random_file, tmp_path):
    def damage(t):
        t["quantizer.rvq_first.input_proj.weight"] = t["quantizer.rvq_first.input_proj.weight"].to(torch.int32)

    bad = _rewrite(random_file, tmp_path / NAME, damage)
    with pytest.raises(mimi.MimiCheckpointError, match="rvq_first.input_proj.weight` has dtype I32"):
        mimi.load(bad, "cpu", CFG)


def test_bf16_tensors_load_as_fp32(random_file, tmp_path):
    good = _rewrite(random_file, tmp_path / NAME, lambda t: t.update({k: v.bfloat16() for k, v in t.items()}))
    model = mimi.load(good, "cpu", CFG)
    weight = model.encoder.model[0].conv.conv.weight
    assert weight.dtype == torch.float32
    assert torch.equal(weight, safetensors.torch.load_file(str(good))["encoder.model.0.conv.conv.weight"].float())


def test_not_a_safetensors_file_and_a_missing_file_name_the_file(tmp_path):
    junk = tmp_path / NAME
    junk.write_bytes(b"this is not a checkpoint")
    with pytest.raises(mimi.MimiCheckpointError, match="not a readable safetensors file"):
        mimi.load(junk, "cpu", CFG)
    with pytest.raises(mimi.MimiCheckpointError, match="file not found"):
        mimi.load(tmp_path / "absent.safetensors", "cpu", CFG)


def test_extra_keys_give_one_warning_and_stored_codebooks_none(random_file, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=mimi_checkpoint_io.__name__):
        mimi.load(random_file, "cpu", CFG)
    assert not caplog.records
    extras = {f"extra.{i}": torch.zeros(1) for i in range(12)}
    extra = _rewrite(random_file, tmp_path / NAME, lambda t: t.update(extras))
    with caplog.at_level(logging.WARNING, logger=mimi_checkpoint_io.__name__):
        mimi.load(extra, "cpu", CFG)
    assert len(caplog.records) == 1
    assert caplog.records[0].count == 12
    assert len(caplog.records[0].first) == 10
