"""The platform with every hop secured as production runs it, in one platform start (they cost
seconds each). Redis: TLS only (`rediss://`, a CA made in the test), the default user behind a
password, the platform connecting as an ACL user with the narrowest rights docs/deploy.md gives;
the URL and the CA reach the sim pod and the gateway only through the environment
(`$LIVEPLEX_REDIS_URL`, `$LIVEPLEX_REDIS_CA` as the PEM text a Secret key holds). Gateway to pod:
the pod serves TLS with a certificate for a service name, the gateway dials it with
`--upstream-ca` and `--upstream-server-name`. A session runs through them, and the operator's
load reader, built as `liveplex operator run` builds it, counts that session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
import redis
import trustme
import websockets

from liveplex.operator import cli, placement_store
from liveplex.placement import PlacementClient, url
from tests.support import clients, platform
from tests.support.secure_redis import ADMIN_PASSWORD, USER, secure_redis

pytestmark = pytest.mark.timeout(120)


def _engine_tls(tmp: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pod's flags (its certificate, for a service name) and the gateway's (the CA, the name)."""
    ca, name = trustme.CA(), "liveplex-engine.voice.svc"
    issued = ca.issue_cert(name)
    cert, key, bundle = tmp / "engine.pem", tmp / "engine.key", tmp / "engine-ca.pem"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(bundle))
    return ("--tls-cert", str(cert), "--tls-key", str(key)), ("--upstream-ca", str(bundle),
                                                              "--upstream-server-name", name)


def test_a_session_runs_over_tls_pods_and_rediss_as_an_acl_user_and_the_operator_reads_its_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pod_flags, gateway_flags = _engine_tls(tmp_path)
    with secure_redis(tmp_path) as r:
        monkeypatch.setenv(url.REDIS_URL_ENV, r.url)
        monkeypatch.setenv(url.REDIS_CA_ENV, r.ca.read_text())
        plain = f"redis://127.0.0.1:{r.port}/0"  # no TLS, no user: refused
        with pytest.raises(redis.ConnectionError), redis.Redis.from_url(plain, socket_timeout=1) as client:
            client.ping()
        settings = cli.settings_from_args(cli.build_parser().parse_args(["run", "-n", "voice"]))
        assert settings.redis_url is not None and "ssl_ca_data" in settings.redis_url
        with platform.platform(None, tmp_path, n_pods=2, pod_flags=pod_flags, gateway_flags=gateway_flags) as p:
            for proc in [p.gateway_process, *(proc for _, proc in p.pods)]:  # nothing secret on a command line
                cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
                assert b"s3cret" not in cmdline and b"rediss" not in cmdline

            async def session() -> tuple[int, int]:
                loads = PlacementClient(settings.redis_url)
                try:
                    async with websockets.connect(p.gateway.ws_url) as ws:
                        await ws.send(orjson.dumps(clients.START).decode())
                        await clients.until(ws, "session.started")
                        audio = {"type": "session.input_audio.append", "audio": clients.LOUD}
                        await ws.send(orjson.dumps(audio).decode())
                        await clients.until(ws, "session.output_audio.delta")
                        reader = placement_store.PlacementLoads(loads)
                        async with asyncio.timeout(5):  # the pod's next heartbeat carries the session
                            while (load := await reader.read(platform.POOL, 1)).active != 1:
                                await asyncio.sleep(0.05)
                        # its pod drains: the call moves over the pods' TLS handover routes, unnoticed
                        source = p.pod_sessions().index(1)
                        drained = await asyncio.to_thread(
                            platform.get_json, p.pods[source][0].admin_root + "/drain?deadline_s=20")
                        assert drained == {"drained": True, "ended_at_deadline": 0}
                        moved = [0, 1] if source == 0 else [1, 0]
                        await asyncio.to_thread(platform.eventually, lambda: p.pod_sessions() == moved,
                                                "the call on the other pod")
                        _, seen = await clients.until(ws, "session.output_audio.delta")
                        assert {e["type"] for e in seen} == {"session.output_audio.delta"}  # no word of it
                    with pytest.raises((websockets.InvalidMessage, ConnectionError, EOFError)):  # the pod: TLS only
                        async with websockets.connect(p.pods[0][0].ws_url, open_timeout=5):
                            pass
                    return load.active, load.capacity
                finally:
                    await loads.close()

            active, capacity = asyncio.run(session())
            assert active == 1 and capacity > 0
            with redis.Redis(host="127.0.0.1", port=r.port, password=ADMIN_PASSWORD, ssl=True,
                             ssl_ca_certs=str(r.ca), decode_responses=True) as admin:
                users = {c["user"] for c in admin.client_list()}
            assert users == {USER, "default"}, users  # the gateway's and the pods' connections are the ACL user's
