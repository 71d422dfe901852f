"""The gateway's flags: each bad value refused in one error naming its flag; the pod token from a
file or the environment, never the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import trustme

from liveplex.gateway import settings


def parse(*flags: str, environ: dict[str, str] | None = None) -> settings.GatewaySettings:
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser)
    return settings.settings_from_args(parser.parse_args(["--redis-url", "redis://r:6379", *flags]), environ or {})


@pytest.mark.parametrize("flags, says", [
    (("--upstream-silence-ms", "0"), "--upstream-silence-ms must be > 0"),
    (("--moves-at-once", "0"), "--moves-at-once must be > 0"),
    (("--starts-per-key-per-s", "-1"), "--starts-per-key-per-s must be >= 0"),
    (("--starts-per-key-per-s", "nan"), "--starts-per-key-per-s must be >= 0"),
    (("--pod-key-file", "/nonexistent/token"), "--pod-key-file: cannot read /nonexistent/token"),
])
def test_bad_values_name_their_flag(flags: tuple[str, ...], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse(*flags)


def test_the_pod_token_comes_from_its_file_else_the_environment(tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    assert parse("--pod-key-file", str(token)).pod_key == "t0ken"
    assert parse(environ={settings.POD_KEY_ENV: "from-env"}).pod_key == "from-env"
    assert parse().pod_key is None
    token.write_text("caf\u00e9\n")
    with pytest.raises(ValueError, match="--pod-key-file: the pod key is not printable ASCII"):
        parse("--pod-key-file", str(token))


def test_per_key_limits_have_defaults_that_protect_the_pool() -> None:
    defaults = parse()
    assert (defaults.max_sessions_per_key, defaults.starts_per_key_per_s) == (100, 20.0)
    assert parse("--max-sessions-per-key", "0", "--starts-per-key-per-s", "0").max_sessions_per_key == 0


def test_upstream_tls_flags_are_checked_once(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    s = parse("--upstream-ca", str(bundle), "--upstream-server-name", "engine.voice.svc")
    assert (s.upstream_ca, s.upstream_server_name) == (bundle, "engine.voice.svc")
    with pytest.raises(ValueError, match="--upstream-server-name needs --upstream-ca"):
        parse("--upstream-server-name", "engine.voice.svc")
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="--upstream-ca: cannot load"):
        parse("--upstream-ca", str(tmp_path / "junk.pem"))


def test_peer_tls_flags_go_with_a_wss_peer_url_on_a_gateway_serving_tls(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    s = parse("--peer-url", "wss://10.0.0.7:8000", "--peer-ca", str(bundle), "--peer-server-name", "gw.example")
    tls = s.peer_tls(serves_tls=True)
    assert tls is not None and tls.server_name == "gw.example"
    with pytest.raises(ValueError, match=r"--peer-url must be ws:// \(this gateway serves plain"):
        s.peer_tls(serves_tls=False)
    plain = parse("--peer-url", "ws://10.0.0.7:8000")
    assert plain.peer_tls(serves_tls=False) is None and parse().peer_tls(serves_tls=True) is None
    with pytest.raises(ValueError, match=r"--peer-url must be wss:// \(this gateway serves TLS"):
        plain.peer_tls(serves_tls=True)
    for flag, value in (("--peer-ca", str(bundle)), ("--peer-server-name", "gw.example")):
        with pytest.raises(ValueError, match=f"{flag} needs a wss:// --peer-url"):
            parse("--peer-url", "ws://10.0.0.7:8000", flag, value)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(ValueError, match="--peer-ca: cannot load"):
        parse("--peer-url", "wss://10.0.0.7:8000", "--peer-ca", str(tmp_path / "junk.pem"))
