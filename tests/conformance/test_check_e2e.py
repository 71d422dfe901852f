"""`liveplex check` against real `liveplex serve --engine sim` processes: every check must pass.

One server per setting the checklist needs (gpt-live §14): the defaults; capacity 1; auth, a 2 s
idle guard, a 5 s session limit and a custom voice; an injected engine fault; and a gateway that
stores sessions (checks 43 and 44, with two API keys), before a sim pod over real Redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance import servers
from tests.support import platform, pods

pytestmark = pytest.mark.timeout(300)

SPECIAL = {2: "auth", 3: "idle guard", 18: "capacity", 19: "capacity", 36: "expiry", 37: "fault", 43: "store",
           44: "store"}
"""Checks that only partly run, or SKIP, against a default server."""


def _assert_clean(code: int, lines: list[str]) -> dict[int, str]:
    statuses = servers.report(lines)
    failed = [line for line in lines if line.startswith("FAIL")]
    assert not failed, "\n".join(lines)
    assert code == 0, "\n".join(lines)
    return statuses


def test_the_full_checklist_passes_at_its_default_concurrency_against_a_four_slot_server(tmp_path):
    """The README's laptop pod has 4 slots: 23 checks met `server_busy` there, and check 40 then
    looped for ever. The checker fits its checks and sockets to the capacity it reads."""
    with servers.serve("--max-sessions", "4", log=tmp_path / "serve.log") as base:
        code, lines = servers.check(base)
    statuses = _assert_clean(code, lines)
    assert set(statuses) == set(range(1, 45))
    skipped = {n for n, s in statuses.items() if s == "SKIP"}
    assert skipped <= {36, 37, 43, 44}, "\n".join(lines)
    assert "at most 4 checks and 4 sockets at once" in lines


def test_capacity_checks_pass_against_a_one_slot_server(tmp_path):
    with servers.serve("--max-sessions", "1", log=tmp_path / "serve.log") as base:
        code, lines = servers.check(base, "--only", "18,19,21,38", "--expect-capacity", "1")
    statuses = _assert_clean(code, lines)
    assert statuses == {18: "PASS", 19: "PASS", 21: "PASS", 38: "PASS"}


def test_auth_idle_guard_and_expiry_checks_pass(tmp_path):
    flags = ("--auth-token", "s3cret", "--idle-guard-s", "2", "--max-seconds", "5")
    with servers.serve(*flags, log=tmp_path / "serve.log") as base:
        code, lines = servers.check(base, "--only", "2,3,8,36,38", "--auth-token", "s3cret", "--idle-guard-s", "2")
    statuses = _assert_clean(code, lines)
    assert statuses == dict.fromkeys((2, 3, 8, 36, 38), "PASS")


def test_a_registered_custom_voice_passes_the_voice_check(tmp_path):
    voices = tmp_path / "voices"
    voices.mkdir()
    (voices / "studio.pt").write_bytes(b"")
    with servers.serve("--voice-dir", str(voices), log=tmp_path / "serve.log") as base:
        code, lines = servers.check(base, "--only", "14", "--custom-voice", "studio")
    assert _assert_clean(code, lines) == {14: "PASS"}
    assert any("custom id 'studio' accepted" in line for line in lines), "\n".join(lines)


def test_the_fault_check_passes_against_a_failing_engine(tmp_path):
    with servers.serve("--fail-after-ticks", "25", log=tmp_path / "serve.log") as base:
        code, lines = servers.check(base, "--only", "37,38", "--expect-fault")
    assert _assert_clean(code, lines) == {37: "PASS", 38: "PASS"}


def test_the_store_checks_pass_against_a_gateway_that_stores_and_fail_against_a_pod_said_to(
        redis_url: str, tmp_path: Path) -> None:
    """A pod serving clients itself refuses `store: true` by name: checks 43 and 44 skip, or fail
    when told the server stores."""
    keys = tmp_path / "keys"
    keys.write_text("first-key\nsecond-key\n")
    flags = ("--store-dir", str(tmp_path / "stored"), "--store-flush-s", "0.3", "--api-key-file", str(keys))
    with platform.platform(redis_url, tmp_path, n_pods=1, gateway_flags=flags) as running:
        code, lines = servers.check(running.gateway.base_url, "--only", "1,13,43,44", "--api-key", "first-key",
                                    "--other-api-key", "second-key", "--expect-store")
        assert _assert_clean(code, lines) == {1: "PASS", 13: "PASS", 43: "PASS", 44: "PASS"}
        assert sum("so is another key's" in line for line in lines) == 2, "\n".join(lines)
        code, lines = servers.check(running.pods[0][0].base_url, "--only", "43,44", "--expect-store")
    assert code == 1 and servers.report(lines) == {43: "FAIL", 44: "FAIL"}, "\n".join(lines)


def test_the_checker_fails_against_a_server_that_is_not_there():
    code, lines = servers.check_process(f"http://127.0.0.1:{pods.free_port()}/v1", "--timeout", "1")
    assert code == 1
    assert lines[-1].startswith("FAIL  cannot read the server's configuration")
