"""`liveplex serve --engine personaplex` on the tiny checkpoint, end to end over real sockets.

`liveplex check` runs against it (capacity, expiry and fault each on a server started for them),
and the official `openai` SDK holds a session. The tiny model's audio is noise from random
weights, but every code path is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import websockets

from liveplex.conformance import checks
from tests.conformance import servers
from tests.support import clients, platform, pods

pytestmark = pytest.mark.timeout(300)

SIM_ONLY = {18, 19, 36, 37, 43, 44}
"""Checks that SKIP against a default server (capacity 1, expiry, fault need their own servers; a
pod stores nothing to download or fork)."""
EVERY_CHECK = {c.number for c in checks.ALL}


@contextlib.contextmanager
def personaplex(tiny_dir: Path, log: Path, *flags: str) -> Iterator[str]:
    # `servers.serve` passes `--engine sim` first; argparse keeps the last `--engine`. The prefill
    # budget is the engine's own (measured by bucket, never under its floor: docs/engine_pod.md).
    with servers.serve(*_engine(tiny_dir), *flags, log=log) as base:
        yield base


def _engine(tiny_dir: Path) -> tuple[str, ...]:
    return "--engine", "personaplex", "--model-path", str(tiny_dir), "--device", "cpu"


def _clean(code: int, lines: list[str]) -> dict[int, str]:
    assert code == 0 and not [line for line in lines if line.startswith("FAIL")], "\n".join(lines)
    return servers.report(lines)


def _wait_ready(base: str) -> None:
    """Poll `/ready` until the engine is built (the pod answers `/health` before that)."""
    deadline = time.monotonic() + servers.READY_S
    while _ready_status(base) != 200:  # readiness poll of a child process, not test synchronisation
        assert time.monotonic() < deadline, "the engine never turned ready"
        time.sleep(0.1)


def _ready_status(base: str) -> int:
    try:
        with urllib.request.urlopen(base.removesuffix("/v1") + "/ready", timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_full_checklist_passes_against_the_tiny_model(tiny_dir, tmp_path):
    # 16 slots cover the sessions two concurrent checks open at once (at the checker's default of
    # 8 concurrent checks it opens more than 16; see docs/engine_pod.md).
    with personaplex(tiny_dir, tmp_path / "serve.log", "--max-sessions", "16", "--schedule", "reference") as base:
        config = servers.get_json(base.removesuffix("/v1") + "/live/config")
        code, lines = servers.check(base, "--concurrency", "2")
        stats = servers.get_json(base.removesuffix("/v1") + "/live/stats")
    statuses = _clean(code, lines)
    assert set(statuses) == EVERY_CHECK
    assert {n for n, s in statuses.items() if s == "SKIP"} <= SIM_ONLY, "\n".join(lines)
    assert config["voices"] == ["NATF2", "NATM1", "cedar", "marin"]  # the OpenAI names mapped onto them
    assert config["max_instructions_chars"] == (3000 - 15 - 7) // 4 - 18  # D5 with the longest voice, 7 frames
    assert (config["schedule"], stats["schedule"], config["dtype"]) == ("reference", "reference", "fp32")  # D3


SERVED_CHECKS = (8, 14, 15, 25, 34)
"""What shows a pod serving through a gateway, fast: a start, the voices, the longest role prompt
(the whole window written to the ring), usage equal to the deltas streamed, a close."""


@contextlib.contextmanager
def _fp8_behind_a_gateway(tiny_dir: Path, redis_url: str, tmp: Path, slots: int) -> Iterator[str]:
    """Issue 36's "done when": a tiny pod on an 8-bit KV ring in a pool, a real gateway in front
    (real redis-server); yields the gateway's `/v1` base URL once it sees the pod."""
    with platform.platform(redis_url, tmp, n_pods=1,
                           pod_flags=(*_engine(tiny_dir), "--kv-dtype", "fp8", "--max-sessions", str(slots))) as p:
        yield p.gateway.base_url


def test_an_8_bit_kv_ring_serves_the_tiny_model_through_a_gateway(tiny_dir, redis_url, tmp_path):
    """The gateway's config is the pod's, so it says which ring serves (the full checklist through
    the gateway is the slow test below)."""
    with _fp8_behind_a_gateway(tiny_dir, redis_url, tmp_path, 4) as base:
        config = servers.get_json(base.removesuffix("/v1") + "/live/config")
        code, lines = servers.check(base, "--concurrency", "2", "--only", ",".join(map(str, SERVED_CHECKS)))
    assert _clean(code, lines) == dict.fromkeys(SERVED_CHECKS, "PASS")
    assert (config["dtype"], config["kv_dtype"]) == ("fp32", "fp8")


@pytest.mark.slow  # ~50 s of real-time streams; on a starved box the cadence checks (22, 28) fall behind
def test_the_full_checklist_passes_through_a_gateway_against_an_8_bit_kv_ring(tiny_dir, redis_url, tmp_path):
    with _fp8_behind_a_gateway(tiny_dir, redis_url, tmp_path, 8) as base:
        code, lines = servers.check(base, "--concurrency", "2")
    statuses = _clean(code, lines)
    assert set(statuses) == EVERY_CHECK
    assert {n for n, s in statuses.items() if s == "SKIP"} == {36, 37, 43, 44}, "\n".join(lines)  # + no store


def test_the_full_checklist_passes_against_a_moshi_checkpoint(tiny_moshi_dir, tmp_path):
    """`make-tiny --moshi`: no voices, no instructions; the PersonaPlex names all play its one voice."""
    with personaplex(tiny_moshi_dir, tmp_path / "serve.log", "--max-sessions", "16") as base:
        config = servers.get_json(base.removesuffix("/v1") + "/live/config")
        code, lines = servers.check(base, "--concurrency", "2")
    statuses = _clean(code, lines)
    assert set(statuses) == EVERY_CHECK
    assert {n for n, s in statuses.items() if s == "SKIP"} <= SIM_ONLY, "\n".join(lines)
    assert {"NATF2", "NATM1", "cedar", "marin"} <= set(config["voices"])
    assert (config["max_instructions_chars"], config["instructions"], config["schedule"]) == (0, "", "upstream")


def test_capacity_checks_pass_against_a_one_slot_server(tiny_dir, tmp_path):
    with personaplex(tiny_dir, tmp_path / "serve.log", "--max-sessions", "1") as base:
        code, lines = servers.check(base, "--only", "18,19,21,38", "--expect-capacity", "1")
    assert _clean(code, lines) == dict.fromkeys((18, 19, 21, 38), "PASS")


def test_a_model_fault_ends_sessions_with_error_then_closed_and_the_pod_turns_not_ready(tiny_dir, tmp_path):
    with personaplex(tiny_dir, tmp_path / "serve.log", "--fail-after-ticks", "25") as base:
        _wait_ready(base)
        code, lines = servers.check(base, "--only", "37,38", "--expect-fault")
        assert _clean(code, lines) == {37: "PASS", 38: "PASS"}
        assert _ready_status(base) == 503


def test_the_openai_sdk_holds_a_session_and_sessions_expire(tiny_dir, tmp_path):
    admin = pods.free_port()
    with personaplex(tiny_dir, tmp_path / "serve.log", "--max-seconds", "5", "--admin-port", str(admin)) as base:
        deltas, _, reason = asyncio.run(clients.sdk_call(base))
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5).read().decode()
        code, lines = servers.check(base, "--only", "36")
    assert _clean(code, lines) == {36: "PASS"}
    assert reason == "close_requested"
    assert {len(d) for d in deltas} == {3840}
    assert len(deltas) >= 0.7 * clients.SPEECH_MS / 80
    assert "liveplex_engine_prefill_duration_seconds_count 1.0" in metrics
    assert 'schedule="upstream"' in next(line for line in metrics.splitlines()
                                         if line.startswith("liveplex_engine_info{"))  # the default (D3)
    assert "liveplex_engine_kv_occupancy_ratio" in metrics


async def _commentary_transcript(base: str, text: str) -> str:
    """Start a session, append `text` as commentary, and read the transcript until it shows."""
    async with websockets.connect(base.replace("http", "ws", 1) + "/live/sessions") as ws:
        await ws.send(orjson.dumps(clients.START).decode())
        await clients.until(ws, "session.started", timeout=30)
        await ws.send(orjson.dumps({"type": "session.commentary.append", "event_id": "k1", "content": text}).decode())
        ack, _ = await clients.until(ws, "session.commentary.appended")
        assert ack["client_event_id"] == "k1"
        said = ""
        async with asyncio.timeout(30):
            while text not in said:
                event = orjson.loads(await ws.recv())
                if event["type"] == "session.output_transcript.delta" and event["start_ms"] >= ack["start_ms"]:
                    said += event["delta"]
        return said


def test_commentary_is_spoken_by_the_tiny_personaplex_over_the_socket(tiny_dir, tmp_path):
    """Issue 21: the text of `session.commentary.append` becomes the model's text stream, so its words
    come back, in order, as the transcript (tiny tokenizer: each word one id, detokenized back)."""
    with personaplex(tiny_dir, tmp_path / "serve.log") as base:
        said = asyncio.run(_commentary_transcript(base, "hello there, how are you"))
    assert "hello there, how are you" in said
