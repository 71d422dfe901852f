"""What the bench reads about a server process: its CPU time, finely enough for a 1 s level."""

from __future__ import annotations

import subprocess
import sys

from liveplex.bench import target

BURN = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
t = time.process_time()
while time.process_time() - t < 0.025:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_the_cpu_time_of_another_process_resolves_milliseconds() -> None:
    """`/proc/PID/stat` counts 10 ms ticks: a baseline serving 2 sessions for 1 s read 0.0 CPU, and
    `baseline_cpu_us_per_frame` with it. 25 ms of work must read as 25 ms, not 20 or 30."""
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        server = target.Target("child", "http://127.0.0.1:1/v1", child.pid)
        assert child.stdout.readline() == "ready\n"
        before = server.cpu_s()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        after = server.cpu_s()
    finally:
        child.kill()
        child.wait()
    assert before is not None and after is not None
    assert 0.025 <= after - before < 0.029
    assert server.cpu_s() is None  # the process is gone


def test_no_pid_no_cpu() -> None:
    assert target.Target("remote", "http://127.0.0.1:1/v1").cpu_s() is None
