"""TLS on the client port: the official SDK over `wss://` through a gateway whose certificate comes
from a CA made in the test, and a renewed certificate served without a restart. TLS from the
gateway to the pods is in tests/test_secure_transport.py, with a TLS Redis (one platform start)."""

from __future__ import annotations

import asyncio
import base64
import ssl
from pathlib import Path

import openai
import pytest
import trustme

from liveplex.conformance import signals
from liveplex.gptlive.server import run
from tests.support import platform

pytestmark = pytest.mark.timeout(120)


def _files(ca: trustme.CA, tmp: Path, name: str) -> tuple[Path, Path]:
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = tmp / f"{name}.pem", tmp / f"{name}.key"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    key.write_bytes(issued.private_key_pem.bytes())
    return cert, key


def test_the_sdk_holds_a_session_over_wss_through_a_gateway_with_tls(redis_url, tmp_path) -> None:
    ca = trustme.CA()
    cert, key = _files(ca, tmp_path, "gateway")
    trusted = ssl.create_default_context()
    ca.configure_trust(trusted)
    with platform.platform(redis_url, tmp_path, gateway_flags=("--tls-cert", str(cert), "--tls-key", str(key))) as p:
        async def call() -> tuple[int, str]:
            client = openai.AsyncOpenAI(base_url=f"https://{p.gateway.address}/v1", api_key="any")
            speech = signals.speech(400)
            step = signals.FRAME_MS * signals.BYTES_PER_MS
            deltas, reason = 0, ""
            async with client.live.connect(websocket_connection_options={"ssl": trusted}) as conn:  # type: ignore[typeddict-unknown-key]
                await conn.session.start(session={"model": "gpt-live-1"})
                async for event in conn:
                    if event.type == "session.started":
                        for offset in range(0, len(speech), step):
                            await conn.session.input_audio.append(audio=signals.b64(speech[offset:offset + step]))
                        await conn.session.close()
                    elif event.type == "session.output_audio.delta":
                        deltas += len(base64.b64decode(event.delta)) > 0
                    elif event.type == "session.closed":
                        reason = event.reason
                        break
            return deltas, reason
        deltas, reason = asyncio.run(call())
        assert deltas > 0 and reason == "close_requested"
        untrusted = ssl.create_default_context()  # the system's CAs do not know the test's
        with pytest.raises(ssl.SSLCertVerificationError):
            asyncio.run(asyncio.open_connection(*p.gateway.address.rsplit(":", 1), ssl=untrusted))
        assert platform.get_json(p.gateway.admin_root + "/live/stats")["pods"] == 2  # admin stays plain


async def test_a_renewed_certificate_serves_new_handshakes_without_a_restart(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(run, "TLS_RELOAD_S", 0.05)
    old_ca, new_ca = trustme.CA(), trustme.CA()
    cert, key = _files(old_ca, tmp_path, "serving")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]

    async def verifies(ca: trustme.CA) -> bool:
        client = ssl.create_default_context()
        ca.configure_trust(client)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        except ssl.SSLCertVerificationError:
            return False
        writer.close()
        return True

    reloading = asyncio.create_task(run._reload_tls(context, cert, key))
    try:
        assert await verifies(old_ca) and not await verifies(new_ca)
        renewed_cert, renewed_key = _files(new_ca, tmp_path, "renewed")
        key.write_bytes(renewed_key.read_bytes())
        cert.write_bytes(renewed_cert.read_bytes())
        async with asyncio.timeout(5):
            while not await verifies(new_ca):
                await asyncio.sleep(0.05)
        assert not await verifies(old_ca)
    finally:
        reloading.cancel()
        server.close()

