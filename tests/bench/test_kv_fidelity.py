"""The 8-bit KV ring's fidelity on the tiny models (issue 36): `liveplex bench kv-fidelity` on a
shorter run than docs/personaplex.md's (60 frames per session instead of 300, the third session
joining at tick 20): both tiny models, three sessions, past the 40-frame window, teacher-forced."""

from __future__ import annotations

import pytest

from liveplex.bench import kv_logits


def _check(report: dict) -> None:
    for model in ("personaplex", "moshi"):
        got = report[model]
        assert got["text_cosine_median"] >= kv_logits.TEXT_COSINE_MEDIAN, (model, got)
        assert got["audio_cosine_median"] >= kv_logits.AUDIO_COSINE_MEDIAN, (model, got)
        assert min(got["text_cosine_min"], got["audio_cosine_min"]) >= kv_logits.EVERY_FRAME_COSINE, (model, got)
        assert got["meets_bar"] and len(got["greedy_agreement"]) == 9
        assert got["text_cosine_median"] < 1.0  # the 8-bit ring did run: its logits are not the fp32 ring's


def test_the_8_bit_ring_keeps_the_logits_of_both_tiny_models_over_a_short_run():
    report = kv_logits.measure(frames=60, late=20, seed=0)
    assert report["personaplex"]["frames_compared"] == report["moshi"]["frames_compared"] == 3 * 60
    _check(report)


@pytest.mark.slow
def test_the_8_bit_ring_keeps_the_logits_over_300_frames():
    _check(kv_logits.measure(frames=300, late=100, seed=0))
