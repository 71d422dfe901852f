"""The README's first day, as a new user has it: the core package alone in a fresh venv
(`python3 -m venv .venv && .venv/bin/pip install -e .`, no extra), then `liveplex serve` with the
demo page in Chromium with a fake microphone, `liveplex up --pods 2` with the official SDK through
its gateway, and `liveplex <every command> --help`.

The suite's own venv has every extra, which is how the first call from the demo page came to be
silent on a core install (it tried WebRTC, met a 501, and its fallback closed the microphone) and
`liveplex up` came to need the emulator's `cryptography`, with no test noticing either.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright import sync_api

from liveplex import cli
from tests.demo.test_demo_transports import heard
from tests.support import clients, pods

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
EXTRAS = ("torch", "aiortc", "av", "openai", "jsonschema", "kopf", "kubernetes", "yaml", "cryptography",
          "celpy", "soxr", "safetensors", "matplotlib", "huggingface_hub")
"""Top-level modules that only extras bring: none may be importable in the core venv."""


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's install in a fresh venv: its `bin/` directory."""
    venv = tmp_path_factory.mktemp("core") / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "-e", str(REPO)]
    subprocess.run(pip, check=True, timeout=240, stdout=subprocess.DEVNULL)
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import importlib.util, sys; "
                            "print(*(m for m in sys.argv[1:] if importlib.util.find_spec(m)))", *EXTRAS],
                           capture_output=True, text=True, check=True, timeout=60)
    assert found.stdout.split() == [], f"the core install brought extras' modules: {found.stdout}"
    return venv / "bin"


def test_the_first_call_from_the_demo_page_is_heard(core: Path, browser: sync_api.Browser,
                                                    tmp_path: Path) -> None:
    """`liveplex serve` as the README starts it, the page as a user opens it (no `?transport=`):
    the microphone reaches the pod, the sim's words are shown and its echo is heard."""
    log = tmp_path / "pod.log"
    with pods.subprocess_pod(log=log, liveplex=[str(core / "liveplex")]) as (pod, _):
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(pod.root + "/")
            start = page.get_by_role("button", name="Start call")
            sync_api.expect(start).to_be_enabled()
            start.click()
            heard(page)
        finally:
            context.close()
    assert "Traceback" not in log.read_text()


@contextlib.contextmanager
def _up(core: Path, cwd: Path, log: Path) -> Iterator[str]:
    """`liveplex up --pods 2` (its own redis-server, as the README says) in a terminal's foreground
    process group; yields the gateway's `/v1` base URL once it says everything is up, then stops it
    as Ctrl-C does: SIGINT to the whole group."""
    port = pods.free_port()
    proc = subprocess.Popen([str(core / "liveplex"), "up", "--pods", "2", "--port", str(port)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    up = threading.Event()

    def copy() -> None:
        assert proc.stdout is not None
        with open(log, "ab") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if b"Ctrl-C stops everything" in line:
                    up.set()
        up.set()

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    try:
        assert up.wait(120) and proc.poll() is None, f"liveplex up did not start:\n{log.read_text()}"
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        pods.interrupt(proc, 30, group=True)  # one Ctrl-C: a second would mean "hurry" (kill)
        reader.join(5)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_up_with_two_pods_serves_an_sdk_session_through_its_gateway(core: Path, tmp_path: Path) -> None:
    """The platform on one machine from the core install; the session starts with the model the
    demo page would use (`/live/config`'s), which `/v1/models` must list."""
    log = tmp_path / "up.log"
    with _up(core, tmp_path, log) as base_url:
        root = base_url.removesuffix("/v1")
        config = _get(root + "/live/config")
        assert config["model"] in [m["id"] for m in _get(base_url + "/models")["data"]]
        assert config["transports"] == ["websocket"]
        with concurrent.futures.ThreadPoolExecutor(1) as thread:  # off Playwright's loop on this thread
            call = clients.sdk_call(base_url, model=config["model"])
            deltas, words, reason = thread.submit(asyncio.run, call).result()
        assert reason == "close_requested" and "I hear you" in words and deltas
        assert _get(root + "/live/stats")["pods"] == 2
    said = log.read_text()
    # Ctrl-C stops the pods and the gateway before their Redis: nothing to complain about
    assert "Traceback" not in said and '"level": "warning"' not in said and '"level": "error"' not in said, said


def test_every_command_answers_help(core: Path) -> None:
    """`liveplex <command> --help` for every command and subcommand, extras or not (four at a time:
    each is a process start, most of it waiting on imports)."""
    def helped(path: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(core / "liveplex"), *path, "--help"], capture_output=True, text=True, timeout=60)

    paths = cli.command_paths()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for path, done in zip(paths, pool.map(helped, paths)):
            assert done.returncode == 0, f"liveplex {' '.join(path)} --help: {done.stderr}"
            assert re.match(r"usage: liveplex", done.stdout), (path, done.stdout)
