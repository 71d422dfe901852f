"""`Served.config()`, the `/live/config` document: one JSON type per kind of value, and still the
exact inverse of `from_config`."""

from __future__ import annotations

import dataclasses

import orjson

from liveplex.gptlive.served import Served
from liveplex.gptlive.voices import BUILTIN, Voices
from liveplex.live.contract import LiveInfo
from liveplex.sim_pod.profile import SimProfile


def _served(info: LiveInfo) -> Served:
    return Served(info, Voices(info.voices, BUILTIN), ("gpt-live-1",))


def test_the_engines_numbers_are_numbers_and_its_words_words() -> None:
    sim = _served(SimProfile(prebuffer_frames=3, echo_frames=5).info())
    config = orjson.loads(orjson.dumps(sim.config()))
    assert (config["prebuffer_frames"], config["echo_frames"]) == (3, 5)
    assert all(type(value) is not str for key, value in config.items()
               if key.endswith(("_frames", "_sessions", "_chars", "_ms", "_rate", "_samples", "_seconds")))
    personaplex = _served(dataclasses.replace(SimProfile().info(), engine=(
        ("schedule", "fused"), ("device", "cuda:0"), ("dtype", "bfloat16"), ("tick_groups", "4"))))
    config = orjson.loads(orjson.dumps(personaplex.config()))
    assert (config["schedule"], config["device"], config["dtype"], config["tick_groups"]) == (
        "fused", "cuda:0", "bfloat16", 4)


def test_the_typed_document_still_reads_back_exactly() -> None:
    served = _served(SimProfile(echo_frames=2).info())
    assert Served.from_config(orjson.loads(orjson.dumps(served.config()))) == served
    pausing = dataclasses.replace(served, pauses=True)  # what a gateway refuses a call's wake policy by
    assert Served.from_config(orjson.loads(orjson.dumps(pausing.config()))) == pausing
