"""docs/clients.md stays true: each of its Python blocks runs as written, in the clients venv,
against a sim pod (`-m clients`). The reconnecting block runs here with nothing to reconnect;
test_reconnect.py drops its calls' sockets under the same handler."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.clients.test_frameworks import PYTHON
from tests.support import pods

pytestmark = [pytest.mark.clients, pytest.mark.timeout(180)]

PAGE = Path(__file__).parents[2] / "docs" / "clients.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_page_has_a_block_per_framework() -> None:
    assert len(BLOCKS) == 4 and [b for b in BLOCKS if "GPTLiveModel" in b] and [b for b in BLOCKS if "pipecat" in b]
    assert [b for b in BLOCKS if 'on_reconnecting=lambda ev: {"extra_query": {"session_id": sid}}' in b]


@pytest.mark.parametrize("block", BLOCKS, ids=["livekit", "pipecat", "openai", "openai-reconnecting"])
def test_each_block_runs_as_written(block: str, tmp_path: Path) -> None:
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/test-clients (or set LIVEPLEX_CLIENTS_PYTHON)"
    with pods.subprocess_pod(log=tmp_path / "pod.log") as (pod, _):
        done = subprocess.run([str(PYTHON), "-c", block], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": "", "LIVEPLEX_BASE_URL": pod.base_url})
    assert done.returncode == 0, done.stderr[-4000:]
