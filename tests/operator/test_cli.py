"""`liveplex operator`: the scope is required and exclusive, flags become settings."""

from __future__ import annotations

import json
import logging

import pytest

from liveplex import cli as top
from liveplex.logs import JsonFormatter
from liveplex.operator import cli
from liveplex.operator.settings import OperatorSettings, PodDefaults, SecretKey


def _settings(*argv: str) -> OperatorSettings:
    return cli.settings_from_args(cli.build_parser().parse_args(["run", *argv]))


def test_namespaced_and_clusterwide() -> None:
    assert _settings("-n", "voice", "-n", "lab").namespaces == ("voice", "lab")
    assert _settings("-A").clusterwide


@pytest.mark.parametrize("argv", [[], ["-n", "voice", "-A"]])
def test_the_scope_is_required_and_exclusive(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _settings(*argv)


def test_redis_secret_image_and_liveness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIVEPLEX_REDIS_URL", raising=False)
    s = _settings("-A", "--redis-url", "redis://r:6379", "--redis-secret", "redis-auth:uri",
                  "--image", "registry.local:5000/liveplex:dev", "--liveness", "http://0.0.0.0:9090/healthz")
    assert s.redis_url == "redis://r:6379" and s.redis_secret == SecretKey("redis-auth", "uri")
    assert (s.image_repository, s.image_tag) == ("registry.local:5000/liveplex", "dev")
    assert s.liveness_endpoint == "http://0.0.0.0:9090/healthz"
    untagged = _settings("-A", "--image", "registry.local:5000/liveplex")
    default_tag = OperatorSettings().image_tag
    assert (untagged.image_repository, untagged.image_tag) == ("registry.local:5000/liveplex", default_tag)
    assert _settings("-A", "--redis-secret", "redis-auth").redis_secret == SecretKey("redis-auth", "url")


def test_engine_image_and_pod_defaults() -> None:
    s = _settings("-A", "--image", "registry.local/liveplex:dev", "--engine-image", "registry.local/liveplex-engine",
                  "--runtime-class-name", "nvidia", "--priority-class-name", "gpu-serving",
                  "--image-pull-secret", "regcred", "--image-pull-secret", "mirror")
    assert (s.engine_image_repository, s.image_tag) == ("registry.local/liveplex-engine", "dev")
    assert s.pod_defaults == PodDefaults("nvidia", "gpu-serving", ("regcred", "mirror"))
    assert _settings("-A").pod_defaults == PodDefaults()


def test_the_operator_is_a_liveplex_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert "operator" in top.COMMANDS
    assert top.main(["operator", "crd"]) == 0
    assert "kind: CustomResourceDefinition" in capsys.readouterr().out


def test_election_and_metrics_flags_become_settings_and_bad_ones_are_named() -> None:
    s = _settings("-n", "voice", "--leader-lease", "ops/liveplex-operator", "--leader-lease-s", "5",
                  "--metrics-port", "0", "--pod-tls-secret", "engine-tls")
    assert (s.leader_lease, s.lease_duration_s, s.metrics_port, s.pod_tls_secret) == (
        ("ops", "liveplex-operator"), 5, 0, "engine-tls")
    assert _settings("-A").leader_lease is None and _settings("-A").metrics_port is None
    for flag, bad in (("--leader-lease", "no-slash"), ("--leader-lease-s", "0"), ("--metrics-port", "70000")):
        with pytest.raises(ValueError, match=flag):
            _settings("-A", flag, bad)


def test_kopf_object_lines_keep_the_liveengine_and_drop_kopfs_settings() -> None:
    record = logging.LogRecord("kopf.objects", logging.INFO, __file__, 1, "Handler 'reconcile' succeeded.", None, None)
    vars(record).update(settings=object(), k8s_skip=False, k8s_ref={"namespace": "voice", "name": "pp", "uid": "u"})
    assert cli.KopfFields().filter(record)
    line = json.loads(JsonFormatter().format(record))
    assert line["liveengine"] == "voice/pp" and not {"settings", "k8s_skip", "k8s_ref"} & set(line)
