"""Deriving the LM architecture from a checkpoint: `config.json` (moshi's LM kwargs) or tensor shapes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from moshi.models import loaders
from moshi.models.lm import LMModel

from liveplex.personaplex import architecture, checkpoint, config
from tests.personaplex import upstream

LM = "model.safetensors"
MOSHI_7B = dataclasses.replace(config.personaplex_7b(), dep_steps=8)


def _shapes(cfg: config.LMConfig) -> dict[str, tuple[int, ...]]:
    return checkpoint.expected_lm(cfg, cfg.dep_steps)


@pytest.mark.parametrize("name", sorted(config.CONFIGS))
@pytest.mark.parametrize("steps", [16, 8])
def test_every_named_size_is_derived_from_its_shapes_alone(name, steps):
    cfg = dataclasses.replace(config.CONFIGS[name](), dep_steps=steps)
    derived = architecture.derive(_shapes(cfg), LM)
    assert derived == architecture.Derived(cfg, name, "tensor shapes", (), ())


def test_the_tiny_file_derives_the_tiny_config(lm_checkpoint):
    derived = architecture.derive(checkpoint.shapes(checkpoint.read_header(lm_checkpoint.path)), LM)
    assert derived.cfg == config.tiny() and derived.name == "tiny" and not derived.problems


def test_moshis_own_lm_kwargs_read_as_moshi_7b():
    """`moshi.models.loaders._lm_kwargs`, the config of Kyutai's moshiko/moshika, key for key."""
    derived = architecture.derive(_shapes(MOSHI_7B), LM, loaders._lm_kwargs)
    assert derived == architecture.Derived(MOSHI_7B, "personaplex-7b", "config.json", (), ())
    assert set(loaders._lm_kwargs) <= set(architecture.ACCEPTED)


@st.composite
def _sizes(draw) -> config.LMConfig:
    heads, dep_heads = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dim, dep_dim = heads * 2 * draw(st.integers(1, 6)), dep_heads * draw(st.integers(1, 8))
    return config.LMConfig(
        dim=dim, num_heads=heads, num_layers=draw(st.integers(1, 3)), hidden=draw(st.integers(1, 4 * dim)),
        context=draw(st.integers(16, 4000)), dep_dim=dep_dim, dep_num_heads=dep_heads,
        dep_num_layers=draw(st.integers(1, 3)), dep_hidden=draw(st.integers(1, 4 * dep_dim)),
        dep_steps=draw(st.sampled_from([8, 16])), text_card=draw(st.integers(4, 600)),
        max_period=draw(st.sampled_from([10000.0, 5000.0])))


@settings(max_examples=12, deadline=None)
@given(cfg=_sizes())
def test_moshi_builds_from_our_kwargs_exactly_the_tensors_we_expect_and_we_read_them_back(cfg):
    try:
        kwargs = architecture.to_moshi_kwargs(cfg)
    except ValueError:  # a gated width no moshi `dim_feedforward` yields (e.g. 133 for 50): moshi has none
        assume(False)
    fields, problems, unknown = architecture.from_moshi_kwargs(kwargs, "config.json")
    assert fields == {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} and not problems and not unknown
    state = upstream.export_state(LMModel(device="meta", **kwargs))
    assert {k: tuple(v.shape) for k, v in state.items()} == _shapes(cfg)
    assert architecture.derive(_shapes(cfg), LM, kwargs).cfg == cfg


def test_a_custom_size_without_config_json_takes_kyutais_head_widths_and_says_so():
    cfg = dataclasses.replace(config.tiny(), dim=256, num_heads=2, hidden=300, dep_dim=128, dep_num_heads=2,
                              dep_hidden=200, num_layers=3, text_card=500, context=3000)
    derived = architecture.derive(_shapes(cfg), LM)
    assert derived.cfg == cfg and derived.name == "custom" and not derived.problems
    assert derived.notes == ("num_heads = 2 assumed (head width 128)", "dep_num_heads = 2 assumed (head width 64)")


def test_heads_that_cannot_be_assumed_are_asked_of_config_json():
    """A width no named size has and no 128-wide head splits: config.json must say. (The depformer's
    width 32 is tiny's, so it takes tiny's 4 heads.)"""
    cfg = dataclasses.replace(config.tiny(), dim=48, num_heads=3, hidden=100, context=3000)
    derived = architecture.derive(_shapes(cfg), LM)
    assert derived.problems == (
        f"{LM}: cannot derive `num_heads` for width 48 (not a multiple of 128); give `num_heads` in config.json",)
    assert architecture.derive(_shapes(cfg), LM, {"num_heads": 3}).cfg == cfg


def test_one_damaged_tensor_is_outvoted_and_reported_against_the_majority():
    shapes = _shapes(config.tiny()) | {"text_emb.weight": (32001, 80)}
    derived = architecture.derive(shapes, LM)
    assert derived.cfg == config.tiny() and not derived.problems
    assert checkpoint.check_header(LM, {k: checkpoint.TensorInfo(s, "F32") for k, s in shapes.items()},
                                   _shapes(derived.cfg)) == [
        f"{LM}: `text_emb.weight` has shape [32001, 80], expected [32001, 64]"]


def test_every_problem_of_config_json_and_the_shapes_is_listed_together():
    moshi = dataclasses.replace(config.tiny(), dep_steps=8)
    kwargs = architecture.to_moshi_kwargs(moshi) | {
        "dim": 128, "norm": "layer_norm", "kv_repeat": 2, "conditioners": {"x": {}}, "delays": [0] * 17,
        "depformer_dim_feedforward": [10, 20], "model_type": "hibiki", "n_q": 13, "some_future_key": 1}
    shapes = {k: s for k, s in _shapes(moshi).items() if not k.startswith("emb.1")} | {"emb.12.weight": (2049, 64)}
    derived = architecture.derive(shapes, LM, kwargs)
    assert derived.problems == (
        "config.json: `delays` is [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]; liveplex serves only "
        "[0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1]",
        "config.json: `kv_repeat` is 2; liveplex serves only 1",
        "config.json: `conditioners` is {'x': {}}; liveplex serves only None",
        "config.json: `norm` is 'layer_norm'; liveplex serves only one of ['rms_norm_f32', 'rms_norm']",
        "config.json: `model_type` is 'hibiki'; liveplex serves only one of ['moshi', 'personaplex']",
        "config.json: `depformer_dim_feedforward` is [10, 20], expected one positive integer (liveplex serves "
        "one FFN width for every depformer step)",
        "config.json: `dim` gives dim 128, but the tensors have 64 (`emb.0.weight` is [2049, 64]); give the "
        "tensors' value or leave `dim` out",
        "config.json: `hidden_scale` gives hidden 352, but the tensors have 176 "
        "(`transformer.layers.0.gating.linear_in.weight` is [352, 64]); give the tensors' value or leave "
        "`hidden_scale` out",
        f"{LM}: 13 audio streams (`n_q`); liveplex serves 8 agent + 8 user codebooks (n_q 16)",
    )
    assert derived.notes == ("config.json keys ignored: some_future_key",)


def test_a_file_with_no_tensors_says_what_it_cannot_derive():
    derived = architecture.derive({"something.else": (3,)}, LM)
    assert derived.cfg is None
    assert derived.problems[0] == f"{LM}: cannot derive `dim`: no tensor shows it; give `dim` in config.json"
    assert len(derived.problems) == len(architecture.SHAPE_FIELDS)


def test_moshis_four_times_width_special_case_is_expressible():
    """dim 8, gated width 21 comes only from `dim_feedforward = 4 * dim` (moshi's 21/8 rule)."""
    assert architecture._feedforward(8, 21)[1] == 32
    with pytest.raises(ValueError, match="133 for width 50"):
        architecture._feedforward(50, 133)
