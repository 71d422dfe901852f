"""Real GPT-Live frameworks through the gateway with two sim pods (issue 21): LiveKit Agents,
Pipecat and the openai SDK (3.63), each unchanged, as a new user writes them.

The frameworks live in their own venv (`scripts/test-clients` builds `.venv-clients` from
`tests/clients/requirements.txt`, about 1 GB), so each call is a script run by that venv's python
(`LIVEPLEX_CLIENTS_PYTHON` overrides it) that prints one JSON line; the platform runs here.
Selected with `-m clients`; never part of the default suite.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import platform

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

HERE = Path(__file__).parent
PYTHON = Path(os.environ.get("LIVEPLEX_CLIENTS_PYTHON", HERE.parents[1] / ".venv-clients" / "bin" / "python"))
OPENAI = next(line.split("==")[1] for line in (HERE / "requirements.txt").read_text().splitlines()
              if line.startswith("openai"))
"""The openai SDK the clients venv pins."""


def run(script: str, *args: str, timeout_s: float = 120) -> dict:
    """Run a client script in the clients venv; its JSON line."""
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/test-clients (or set LIVEPLEX_CLIENTS_PYTHON)"
    done = subprocess.run([str(PYTHON), str(HERE / script), *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=HERE, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def gateway(redis_url, tmp_path):
    with platform.platform(redis_url, tmp_path) as p:
        yield p


def test_livekit_default_config_holds_a_call_with_audio_both_ways(gateway):
    out = run("livekit_call.py", gateway.gateway.base_url, "5")
    assert out["errors"] == [] and out["reconnects"] == 0
    [start] = out["starts"]
    assert start["session"]["delegation"]["type"] == "responses"  # the plugin's default
    assert [i["role"] for i in start["session"]["input"]] == ["user", "assistant"]
    assert out["received"]["info"] >= 1  # delegation_unused: the model never delegates
    assert out["out_frames"] >= 0.7 * 5 * 12.5  # the model's audio, in real time
    assert out["out_loud"] >= 0.5 * out["out_frames"]  # the sim echoes the caller's tone: audio went in
    assert out["received"]["session.output_transcript.delta"] > 0


def test_livekit_reconnects_at_expiry_with_its_history_and_continues(redis_url, tmp_path):
    with platform.platform(redis_url, tmp_path, pod_flags=("--max-seconds", "3")) as p:
        out = run("livekit_call.py", p.gateway.base_url, "8", "--say", "Greet the caller")
    assert out["errors"] == []
    assert out["reconnects"] >= 2 and len(out["starts"]) == out["reconnects"] + 1
    assert out["received"]["session.closed"] >= 2 and out["received"]["session.started"] == len(out["starts"])
    first, *later = [s["session"]["input"] for s in out["starts"]]
    said = [i["content"][0]["text"] for i in later[-1] if i["role"] == "assistant"]
    assert len(later[-1]) > len(first) and any("I hear you" in t for t in said)  # the sim's words came back
    assert any("Greet the caller" in t for t in said)  # generate_reply's commentary was said
    assert out["out_frames"] >= 0.6 * 8 * 12.5  # audio kept coming across the reconnects
    assert out["received"]["session.commentary.appended"] == 1


@pytest.mark.parametrize("responses", [False, True], ids=["history", "responses-delegation"])
def test_pipecat_with_history_starts_streams_and_says_its_opening_instruction(gateway, responses):
    out = run("pipecat_call.py", gateway.gateway.ws_url, "3", *(["--responses"] if responses else []))
    assert out["errors"] == []
    assert out["received"] == {"on_session_started": 1}
    session = out["start"]["session"]
    assert [i["role"] for i in session["input"]] == ["user", "assistant"]
    assert session["delegation"]["type"] == ("responses" if responses else "client")
    assert "session.commentary.append" in out["sent_types"]
    assert out["text"].startswith("Greet Ada by name.")  # the opening instruction, said as transcript
    assert out["out_frames"] >= 0.6 * 3 * 12.5 and out["out_loud"] > 0


def test_openai_parses_every_event_and_gets_what_it_declares(gateway):
    out = run("openai_call.py", gateway.gateway.base_url, "6")
    assert out["openai"] == OPENAI and out["invalid"] == []
    resource = out["resource"]
    assert (resource["model"], resource["safety_identifier"]) == ("gpt-live-1.1", "user-42")
    assert out["seen"]["session.commentary.appended"] == 1 and out["transcript"].startswith("Hello Ada")
    assert out["usage"] and all(set(u["usage"]) == {"seconds"} for u in out["usage"])
