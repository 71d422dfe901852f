"""The LM loader (spec personaplex §2.5, §6.11)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import safetensors.torch
import torch

from liveplex.personaplex import checkpoint, config
from tests.personaplex import upstream

ATTN = "depformer.layers.0.self_attn.in_proj_weight"


def _save(tmp_path, state, name="model.safetensors"):
    path = tmp_path / name
    safetensors.torch.save_file(state, str(path))
    return path


def test_a_16_step_file_loads_every_tensor_exactly(lm_checkpoint):
    lm = checkpoint.load_lm(lm_checkpoint.path, lm_checkpoint.cfg, steps=16)
    got = {**lm.temporal.state_dict(), **lm.depformer.state_dict()}
    assert set(got) == set(lm_checkpoint.state)
    assert all(torch.equal(got[k], lm_checkpoint.state[k]) for k in got)
    assert lm.file_steps == 16 and lm.stored_dtypes == ("F32",)


def test_the_live_model_reads_only_steps_0_to_7(lm_checkpoint):
    cfg = lm_checkpoint.cfg
    lm = checkpoint.load_lm(lm_checkpoint.path, cfg, steps=8)
    dep = lm.depformer.state_dict()
    assert set(dep) == {k for k in checkpoint.expected_lm(cfg, 8) if k.startswith(("depformer", "linears."))}
    full = lm_checkpoint.state
    assert torch.equal(dep[ATTN], full[ATTN][: 3 * cfg.dep_dim * 8])
    assert torch.equal(dep["linears.7.weight"], full["linears.7.weight"])
    assert "linears.8.weight" not in dep and "depformer_emb.7.weight" not in dep


def test_bf16_load_casts_every_weight(lm_checkpoint):
    lm = checkpoint.load_lm(lm_checkpoint.path, lm_checkpoint.cfg, dtype=torch.bfloat16)
    dtypes = {p.dtype for p in lm.temporal.parameters()} | {p.dtype for p in lm.depformer.parameters()}
    assert dtypes == {torch.bfloat16}


def test_every_problem_is_reported_with_file_key_and_shapes(tmp_path, lm_checkpoint):
    state = dict(lm_checkpoint.state)
    del state["text_emb.weight"]
    state["transformer.layers.1.gating.linear_in.weight"] = torch.zeros(10, 64)
    state["linears.3.weight"] = state["linears.3.weight"].to(torch.int32)
    path = _save(tmp_path, state)
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load_lm(path, lm_checkpoint.cfg)
    msg = str(e.value)
    assert "3 problems" in msg and len(e.value.problems) == 3 and "model.safetensors" in msg
    assert "`text_emb.weight` is missing, expected shape [32001, 64]" in msg
    assert "`transformer.layers.1.gating.linear_in.weight` has shape [10, 64], expected [352, 64]" in msg
    assert "`linears.3.weight` has dtype I32" in msg


def test_an_unknown_depformer_layout_is_an_error(tmp_path, lm_checkpoint):
    state = dict(lm_checkpoint.state)
    state[ATTN] = state[ATTN][:96]
    with pytest.raises(checkpoint.CheckpointError, match=r"in_proj_weight` has shape \[96, 32\]"):
        checkpoint.load_lm(_save(tmp_path, state), lm_checkpoint.cfg)


def test_not_a_safetensors_file_is_an_error(tmp_path, lm_checkpoint):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="not a readable safetensors file"):
        checkpoint.load_lm(path, lm_checkpoint.cfg)


def test_an_8_step_file_loads_with_a_warning_and_fills_steps_8_to_15(tmp_path, lm_checkpoint, caplog):
    cfg = lm_checkpoint.cfg
    eight = upstream.eight_step(lm_checkpoint.state, cfg)
    assert len(eight) == len(checkpoint.expected_lm(cfg, 8))
    path = _save(tmp_path, eight)
    cfg8 = dataclasses.replace(cfg, dep_steps=8)
    with caplog.at_level(logging.WARNING, logger="liveplex.personaplex.checkpoint"):
        lm = checkpoint.load_lm(path, cfg8, steps=16)
    assert any("Moshi depformer layout" in r.getMessage() for r in caplog.records)
    dep = lm.depformer.state_dict()
    d = cfg.dep_dim
    assert torch.equal(dep[ATTN][3 * d * 8:], eight[ATTN])
    assert torch.equal(dep["linears.12.weight"], eight["linears.4.weight"])
    assert torch.equal(dep["depformer.layers.1.gating.9.linear_out.weight"],
                       eight["depformer.layers.1.gating.1.linear_out.weight"])
    assert torch.equal(dep["depformer_emb.10.weight"], eight["depformer_emb.2.weight"])
    assert not dep["depformer_emb.7.weight"].any()
    live = checkpoint.load_lm(path, cfg8, steps=8)
    assert torch.equal(live.depformer.state_dict()[ATTN], eight[ATTN])


def test_extra_keys_give_one_warning(tmp_path, lm_checkpoint, caplog):
    state = dict(lm_checkpoint.state)
    for i in range(12):
        state[f"extra.{i}"] = torch.zeros(1)
    with caplog.at_level(logging.WARNING, logger="liveplex.personaplex.checkpoint"):
        checkpoint.load_lm(_save(tmp_path, state), lm_checkpoint.cfg)
    warnings = [r for r in caplog.records if "does not use" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].count == 12 and len(warnings[0].first) == 10


def test_the_expected_table_matches_the_real_checkpoint_counts():
    """Spec §1.1/§2.2: 475 tensors and 8,371,408,896 parameters; 355 tensors in the 8-step layout."""
    real = config.personaplex_7b()
    table = checkpoint.expected_lm(real, 16)
    assert len(table) == 475
    assert sum(torch.Size(s).numel() for s in table.values()) == 8_371_408_896
    assert len(checkpoint.expected_lm(real, 8)) == 355
    assert sum(torch.Size(s).numel() for s in checkpoint.expected_lm(real, 8).values()) == 7_687_729_152
