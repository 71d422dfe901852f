"""The key schema of platform §6.1, exactly; every key of a pool in the pool's hash slot."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from liveplex.placement import InvalidName, check_model, check_pod, pool_keys


def test_pool_keys_follow_platform_6_1() -> None:
    k = pool_keys("default/pp")
    assert k.members == "le:{default/pp}:members"
    assert k.pod("pp-7d9f-x2") == "le:{default/pp}:pod:pp-7d9f-x2"
    assert k.resv("pp-7d9f-x2") == "le:{default/pp}:resv:pp-7d9f-x2"
    assert k.config == "le:{default/pp}:config"
    assert k.events == "le:{default/pp}:events"
    assert k.pod_prefix + "p" == k.pod("p") and k.resv_prefix + "p" == k.resv("p")


def _hash_tag(key: str) -> str:
    """The part Redis Cluster hashes: between the first `{` and the next `}`."""
    start = key.index("{")
    return key[start + 1:key.index("}", start)]


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
       st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True),
       st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True))
def test_every_key_of_a_pool_shares_its_hash_tag(namespace: str, name: str, pod: str) -> None:
    k = pool_keys(f"{namespace}/{name}")
    for key in (k.members, k.config, k.events, k.pod(pod), k.resv(pod)):
        assert _hash_tag(key) == f"{namespace}/{name}"


@pytest.mark.parametrize("pool", ["pp", "a/b/c", "/pp", "default/", "Default/pp", "default/PP", "de fault/pp",
                                  "default/{pp}", "-x/pp", "x" * 64 + "/pp", 7])
def test_malformed_pool_names_are_refused_naming_the_parameter(pool: object) -> None:
    with pytest.raises(InvalidName) as raised:
        pool_keys(pool)  # type: ignore[arg-type]
    assert raised.value.param == "pool"
    assert isinstance(raised.value, ValueError) and "pool" in str(raised.value)


@pytest.mark.parametrize("pod", ["", "Pod", "pod}", "pod 1", "-pod", "x" * 254])
def test_malformed_pod_names_are_refused(pod: str) -> None:
    with pytest.raises(InvalidName) as raised:
        pool_keys("default/pp").pod(pod)
    assert raised.value.param == "pod"
    with pytest.raises(InvalidName):
        check_pod(pod)


@pytest.mark.parametrize("model", ["", " gpt-live-1", "gpt-live-1 ", None])
def test_malformed_model_names_are_refused(model: object) -> None:
    with pytest.raises(InvalidName) as raised:
        check_model(model)  # type: ignore[arg-type]
    assert raised.value.param == "model"
