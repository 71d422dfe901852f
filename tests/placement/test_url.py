"""`url.redis_url`: the flag over the environment, and `$LIVEPLEX_REDIS_CA` folded into a
`rediss://` URL as the parameter the Redis client reads (PEM text or a file), bad values named."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import redis.asyncio.connection

from liveplex.placement import url

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
TLS = "rediss://liveplex:pw@redis:6380/0"


def test_the_flag_wins_over_the_environment_and_a_password_is_never_echoed() -> None:
    assert url.redis_url("redis://a:1", {url.REDIS_URL_ENV: "redis://b:2"}) == "redis://a:1"
    assert url.redis_url(None, {url.REDIS_URL_ENV: "redis://b:2"}) == "redis://b:2"
    assert url.redis_url(None, {}) is None
    with pytest.raises(ValueError, match=r"\$LIVEPLEX_REDIS_URL") as bad:
        url.redis_url(None, {url.REDIS_URL_ENV: "http://user:hunter2@redis"})
    assert "hunter2" not in str(bad.value)


def test_a_pem_ca_becomes_ssl_ca_data_the_client_reads() -> None:
    folded = url.redis_url(None, {url.REDIS_URL_ENV: TLS, url.REDIS_CA_ENV: PEM})
    assert folded is not None
    kwargs = redis.asyncio.connection.parse_url(folded)
    assert kwargs["ssl_ca_data"] == PEM and kwargs["username"] == "liveplex" and kwargs["password"] == "pw"
    assert kwargs["connection_class"] is redis.asyncio.connection.SSLConnection


def test_a_ca_file_becomes_ssl_ca_certs_after_the_urls_own_parameters(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    folded = url.redis_url(f"{TLS}?health_check_interval=5", {url.REDIS_CA_ENV: str(ca)})
    assert folded is not None
    assert parse_qs(urlsplit(folded).query) == {"health_check_interval": ["5"], "ssl_ca_certs": [str(ca)]}


@pytest.mark.parametrize(("given", "ca", "says"), [
    ("redis://redis:6379/0", PEM, "not a rediss:// URL"),
    (TLS, "/no/such/ca.pem", "neither PEM text nor a file"),
])
def test_a_ca_that_cannot_apply_is_refused_by_name(given: str, ca: str, says: str) -> None:
    with pytest.raises(ValueError, match=rf"\$LIVEPLEX_REDIS_CA.*{says}|{says}"):
        url.redis_url(given, {url.REDIS_CA_ENV: ca})


def test_a_cluster_scheme_names_a_redis_cluster_and_keeps_the_rest_of_the_url() -> None:
    assert url.cluster("redis+cluster://:pw@node-0:6379") == ("redis://:pw@node-0:6379", True)
    assert url.cluster("rediss+cluster://node-0:6380?x=1") == ("rediss://node-0:6380?x=1", True)
    assert url.cluster("redis://redis:6379/0") == ("redis://redis:6379/0", False)
    folded = url.redis_url(None, {url.REDIS_URL_ENV: "rediss+cluster://node-0:6380", url.REDIS_CA_ENV: PEM})
    assert folded is not None and url.cluster(folded)[1], "a CA is trusted on a TLS cluster too"
    with pytest.raises(ValueError, match="not a rediss:// URL"):
        url.redis_url("redis+cluster://node-0:6379", {url.REDIS_CA_ENV: PEM})
