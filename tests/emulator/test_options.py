"""`options`: query parameters and `Accept` read as kube-apiserver reads them (pure)."""

from __future__ import annotations

import pytest

from liveplex.emulator.apiserver import errors, options

KUBECTL_GET = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
               "application/json")
KUBECTL_DISCOVERY = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")


@pytest.mark.parametrize(("accept", "custom", "conversion"), [
    ("", False, ""), (KUBECTL_GET, True, "Table"), (KUBECTL_DISCOVERY, False, ""), ("application/json, */*", True, ""),
    ("application/vnd.kubernetes.protobuf,application/json", False, ""),
    ("application/vnd.kubernetes.protobuf,application/json", True, ""),
    ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0.5,application/yaml", False, ""),
    ("text/html;q=0.9,application/*", False, ""), ("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
                                                    False, "PartialObjectMetadata"),
])
def test_what_clients_send_is_acceptable(accept: str, custom: bool, conversion: str) -> None:
    """kubectl's, client-go's and the official client's Accept headers, best clause first."""
    assert options.negotiate(accept, custom) == conversion


@pytest.mark.parametrize(("accept", "custom"), [
    ("text/html", False), ("application/vnd.kubernetes.protobuf", True), ("application/json;as=Table", False),
    ("application/json;stream=chunked", False), ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
                                                 False),
])
def test_what_the_server_cannot_write_is_406(accept: str, custom: bool) -> None:
    with pytest.raises(errors.ApiError) as caught:
        options.negotiate(accept, custom)
    assert (caught.value.code, caught.value.reason) == (406, "NotAcceptable")


@pytest.mark.parametrize(("text", "value"), [("5", 5), ("+5", 5), ("-0", 0), (str(-(2 ** 63)), -(2 ** 63))])
def test_an_integer_is_what_strconv_parse_int_reads(text: str, value: int) -> None:
    assert options.parse_int(text) == value


@pytest.mark.parametrize(("text", "why"), [("1_000", "invalid syntax"), (" 1", "invalid syntax"),
                                           ("\u0663", "invalid syntax"), ("", "invalid syntax"),
                                           (str(2 ** 63), "value out of range")])
def test_what_parse_int_refuses_is_400(text: str, why: str) -> None:
    """Python's `int` takes underscores, spaces and any script's digits; Go's ParseInt does not."""
    with pytest.raises(errors.ApiError) as caught:
        options.parse_int(text)
    assert (caught.value.code, caught.value.message.endswith(why)) == (400, True)


def test_a_watch_option_is_any_value_but_0_and_false() -> None:
    assert [options.flag({"watch": [v]}, "watch") for v in ("true", "1", "yes", "", "0", "False")] == [
        True, True, True, True, False, False]
    assert options.flag({}, "watch") is None


def test_the_body_s_delete_options_win_over_the_query_s() -> None:
    query = {"propagationPolicy": ["Bogus"], "gracePeriodSeconds": ["x"]}
    assert options.delete_options({"propagationPolicy": "Orphan"}, query).propagation == "Orphan"
    with pytest.raises(errors.ApiError) as caught:
        options.delete_options(None, {"propagationPolicy": ["Bogus"]})
    assert caught.value.code == 422
