"""`liveplex operator`: the scope is required and exclusive, flags become settings."""

from __future__ import annotations

import pytest

from liveplex import cli as top
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
