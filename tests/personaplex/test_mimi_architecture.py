"""Deriving Mimi's architecture from its tensor shapes, as the LM's is: every named codec from its
shapes alone, any other size too, its heads (which no tensor shows) given or asked for by name."""

from __future__ import annotations

import dataclasses

import pytest

from liveplex.personaplex import mimi
from liveplex.personaplex.mimi import architecture
from liveplex.personaplex.mimi import config as mimi_config

FILE = mimi.checkpoint.FILE_NAME


def _shapes(cfg: mimi.MimiConfig) -> dict[str, tuple[int, ...]]:
    """A file's shapes: the tensors the codec reads and the stored codebooks it does not."""
    shapes = dict(mimi.expected_tensors(cfg))
    for level in range(cfg.codebooks - 1, cfg.stored_codebooks - 1):
        prefix = f"quantizer.rvq_rest.vq.layers.{level}._codebook."
        shapes |= {prefix + "_initialized": (1,), prefix + "cluster_usage": (cfg.bins,),
                   prefix + "embedding_sum": (cfg.bins, cfg.codebook_dim)}
    return shapes


@pytest.mark.parametrize("name", sorted(mimi_config.CONFIGS))
def test_every_named_codec_is_derived_from_its_shapes_alone(name: str) -> None:
    cfg = mimi_config.CONFIGS[name]()
    assert architecture.derive(_shapes(cfg), FILE) == architecture.Derived(cfg, name, (), ())


def test_a_size_no_named_codec_has_is_derived_with_the_heads_of_its_width() -> None:
    cfg = dataclasses.replace(mimi.tiny_config(), dim_feedforward=128, num_layers=3, filters=8, stored_codebooks=9)
    assert architecture.derive(_shapes(cfg), FILE) == architecture.Derived(cfg, "custom", (), ())
    wide = dataclasses.replace(mimi.mimi_config(), dimension=256, num_heads=4, codebook_dim=64)
    derived = architecture.derive(_shapes(wide), FILE)
    assert derived.cfg == wide and derived.notes == ("Mimi num_heads = 4 assumed (head width 64)",)


def test_heads_no_width_tells_are_asked_for_by_their_config_json_key_and_taken_from_it() -> None:
    cfg = dataclasses.replace(mimi.tiny_config(), dimension=48, num_heads=6)
    derived = architecture.derive(_shapes(cfg), FILE)
    assert derived.problems == (f"{FILE}: cannot derive Mimi's `num_heads` for width 48 (not a multiple of 64); "
                                "give `mimi_num_heads` in config.json",)
    assert architecture.derive(_shapes(cfg), FILE, {"mimi_num_heads": 6}).cfg == cfg
    assert architecture.derive(_shapes(cfg), FILE, {"mimi_num_heads": 5}).problems == (
        "config.json: `mimi_num_heads` is 5; give a number of heads that splits Mimi's width 48: one of "
        "[1, 2, 3, 4, 6, 8, 12, 16, 24, 48]",)


def test_one_damaged_tensor_is_outvoted() -> None:
    shapes = _shapes(mimi.tiny_config()) | {"encoder_transformer.transformer.layers.0.linear1.weight": (128, 32)}
    assert architecture.derive(shapes, FILE).cfg == mimi.tiny_config()


def test_a_file_without_mimis_tensors_says_which_file_to_give() -> None:
    derived = architecture.derive({"text_emb.weight": (32001, 64)}, FILE)
    assert derived.cfg is None and len(derived.problems) == 7
    assert derived.problems[0] == (f"{FILE}: cannot derive `filters`: no tensor shows it; give the Mimi file of the "
                                   "checkpoint (this one has none of Mimi's tensors that show it)")
