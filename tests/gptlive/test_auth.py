"""API keys: from a flag, a file or the environment; one credential per request; a browser's key as
a subprotocol (issue 11, item 4)."""

from __future__ import annotations

import httpx
import pytest
import websockets

from liveplex.gptlive.server import auth
from tests.gptlive.test_socket import START, send, until
from tests.support import pods

pytestmark = pytest.mark.timeout(60)

BEARER = {"Authorization": "Bearer t0ken"}


async def refused(url: str, **connect: object) -> int:
    with pytest.raises(websockets.InvalidStatus) as caught:
        await websockets.connect(url, **connect)
    return caught.value.response.status_code


async def test_a_request_with_two_authorization_headers_is_refused_whatever_the_first_says() -> None:
    async with pods.in_process("--api-key", "t0ken") as running:
        for second in ("Bearer nope", "Bearer t0ken"):
            headers = [("Authorization", "Bearer t0ken"), ("Authorization", second)]
            assert await refused(running.ws_url, additional_headers=headers) == 401
            async with httpx.AsyncClient(base_url=running.root) as http:
                assert (await http.get("/v1/models", headers=headers)).status_code == 401
        async with websockets.connect(running.ws_url, additional_headers=BEARER) as ws:
            await send(ws, START)
            await until(ws, "session.started")


async def test_a_browser_offers_its_key_as_a_subprotocol_and_gets_liveplex_back() -> None:
    async with pods.in_process("--api-key", "t0ken") as running:
        offer = [auth.PAGE_SUBPROTOCOL, auth.KEY_SUBPROTOCOL + "t0ken"]
        async with websockets.connect(running.ws_url, subprotocols=offer) as ws:
            assert ws.subprotocol == auth.PAGE_SUBPROTOCOL
            await send(ws, START)
            await until(ws, "session.started")
        assert await refused(running.ws_url, subprotocols=[auth.PAGE_SUBPROTOCOL, auth.KEY_SUBPROTOCOL + "x"]) == 401
        # a key in both places is two credentials
        assert await refused(running.ws_url, subprotocols=offer, additional_headers=BEARER) == 401
        async with httpx.AsyncClient(base_url=running.root) as http:
            assert (await http.get("/live/config")).json()["api_key_required"] is True


async def test_keys_come_from_a_file_or_the_environment(tmp_path, monkeypatch) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# one key a line\nfirst\n\n  second  \n")
    async with pods.in_process("--api-key-file", str(keys)) as running:
        for key in ("first", "second"):
            async with websockets.connect(running.ws_url, additional_headers={"Authorization": f"Bearer {key}"}):
                pass
        assert await refused(running.ws_url, additional_headers={"Authorization": "Bearer # one key a line"}) == 401
    monkeypatch.setenv(auth.ENV_KEYS, "from-env, other")
    async with pods.in_process() as running:
        async with websockets.connect(running.ws_url, additional_headers={"Authorization": "Bearer other"}):
            pass
        assert await refused(running.ws_url) == 401


async def test_a_pod_without_keys_says_so_and_takes_any_credential() -> None:
    async with pods.in_process() as running:
        async with httpx.AsyncClient(base_url=running.root) as http:
            assert (await http.get("/live/config")).json()["api_key_required"] is False
        async with websockets.connect(running.ws_url, subprotocols=[auth.PAGE_SUBPROTOCOL]) as ws:
            assert ws.subprotocol == auth.PAGE_SUBPROTOCOL
        async with websockets.connect(running.ws_url) as ws:
            assert ws.subprotocol is None  # the SDK offers none and gets none (gpt-live §2.1)


def test_a_key_file_that_cannot_be_read_or_holds_no_key_names_the_flag(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(ValueError, match="^--api-key-file: .* holds no key$"):
        auth.load_keys(None, empty, {})
    with pytest.raises(ValueError, match="^--api-key-file: cannot read"):
        auth.load_keys(None, tmp_path / "missing", {})
    assert auth.load_keys("flag", None, {auth.ENV_KEYS: "env"}) == ("flag",)
    assert auth.load_keys(None, None, {auth.ENV_KEYS: "a,,b"}) == ("a", "b")
