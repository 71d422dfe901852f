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


def test_a_pool_is_advertised_with_only_the_models_that_reach_it_and_each_one_starts() -> None:
    routed_alias = PoolCatalog({"gpt-live-1": "ns/a"}, {"ns/a": SERVED})  # its pods' own id is routed nowhere
    default_shadowed = PoolCatalog({"gpt-live-1": "ns/b"}, {"ns/a": SERVED, "ns/b": SERVED}, "ns/a")
    for catalog, pool, models in ((routed_alias, "ns/a", ["gpt-live-1"]), (default_shadowed, "ns/a", ["liveplex-sim"]),
                                  (default_shadowed, "ns/b", ["gpt-live-1"])):
        advertised = catalog.advertised(pool)
        assert advertised is not None
        config = advertised.config()
        assert (config["model"], config["models"]) == (models[0], models)
        assert all(catalog.pool_for(m) == pool and catalog.served_for(m) for m in config["models"])
        assert advertised.voices == SERVED.voices and advertised.info.sample_rate == SERVED.info.sample_rate
    everything = PoolCatalog({"liveplex-sim": "ns/a", "gpt-live-1": "ns/a"}, {"ns/a": SERVED})
    assert everything.advertised("ns/a") == SERVED
    assert PoolCatalog({"x": "ns/a"}, {"ns/a": SERVED}).advertised("ns/a") is None, "no name of its pods reaches it"
    assert PoolCatalog({"x": "ns/a"}).advertised("ns/a") is None, "nothing published"


def test_a_tripped_pod_is_excluded_until_its_time_is_up() -> None:
    breaker = Breaker(open_ms=10_000)
    breaker.trip("pod-0", now_ms=1_000)
    assert breaker.tripped(10_999) == {"pod-0"}
    assert breaker.tripped(11_000) == frozenset()
