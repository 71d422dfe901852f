"""`PoolCatalog` and `Breaker`: pure, fed values."""

from __future__ import annotations

import pytest

from liveplex.gateway import Breaker, PoolCatalog
from liveplex.gptlive import ProtocolError, Served, Voices
from liveplex.live import contract

INFO = contract.LiveInfo(model="liveplex-sim", sample_rate=24000, frame_samples=1920, voices=("NATF2",),
                         default_voice="NATF2", default_instructions="Echo.", max_instructions_chars=100,
                         max_sessions=4, max_frames=3000)
SERVED = Served(INFO, Voices(INFO.voices, {"marin": "NATF2"}), ("gpt-live-1",))


def test_served_round_trips_through_its_published_config() -> None:
    assert Served.from_config(SERVED.config()) == SERVED


def test_a_config_missing_a_key_names_it() -> None:
    config = SERVED.config()
    del config["native_voices"]
    with pytest.raises(ValueError, match="native_voices"):
        Served.from_config(config)


def test_unrouted_models_go_to_the_default_pool_when_its_pods_name_them() -> None:
    catalog = PoolCatalog({}, {"ns/a": SERVED}, "ns/a")
    assert catalog.served_for("gpt-live-1") is SERVED
    with pytest.raises(ProtocolError) as refused:
        catalog.served_for("other")
    assert (refused.value.code.value, refused.value.param) == ("model_not_found", ("session", "model"))


def test_a_routed_model_is_served_by_its_pool_and_a_silent_pool_is_busy() -> None:
    catalog = PoolCatalog({"voice-2": "ns/b", "voice-1": "ns/a"}, {"ns/a": SERVED}, None)
    assert catalog.served_for("voice-1") is SERVED
    with pytest.raises(ProtocolError) as busy:
        catalog.served_for("voice-2")
    assert busy.value.code.value == "server_busy"
    assert catalog.pool_for("voice-2") == "ns/b" and catalog.pool_for("nope") is None
    assert catalog.models() == ("voice-2", "voice-1")


def test_no_route_and_no_default_pool_is_model_not_found_listing_the_routes() -> None:
    with pytest.raises(ProtocolError, match="voice-1"):
        PoolCatalog({"voice-1": "ns/a"}, {"ns/a": SERVED}).served_for("x")


def test_a_tripped_pod_is_excluded_until_its_time_is_up() -> None:
    breaker = Breaker(open_ms=10_000)
    breaker.trip("pod-0", now_ms=1_000)
    assert breaker.tripped(10_999) == {"pod-0"}
    assert breaker.tripped(11_000) == frozenset()
