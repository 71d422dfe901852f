"""Processes that start processes: children that die with their parent, signals a parent obeys.

Every liveplex command that starts children (`liveplex up`, the emulator's kubelet) follows two
rules, so that stopping it in any way leaves nothing running:

- `obey_stop_signals` at its start: a shell starts a background job (`liveplex up &`) with SIGINT
  ignored, and an ignored disposition survives `exec`, so without this the job would never see
  Ctrl-C or `kill -INT`, and asyncio's runner would not even install its handler.
- `spawn` (or `die_with_parent` as a `preexec_fn`): each child gets its own session, so a
  terminal's Ctrl-C reaches only the parent, which stops its children in order; and on Linux a
  parent-death signal, so a parent that is killed outright (SIGKILL, a crash) takes its children
  with it instead of leaving them orphaned.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, cast

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process receives when the thread that started it exits."""


def obey_stop_signals() -> None:
    """SIGINT raises KeyboardInterrupt again, even if this process inherited it ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def die_with_parent() -> None:
    """In a child between fork and exec: receive SIGKILL when the parent dies (Linux only).

    Children are started from the main thread (asyncio's loop thread included), which lives as
    long as the parent: the signal fires on the parent's death, not a worker thread's."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the parent died before the call: nobody would send the signal
            os._exit(1)


def spawn(argv: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv)` as a child of a liveplex command: its own session, and killed with
    its parent (see the module docstring)."""
    child = subprocess.Popen(argv, start_new_session=True, preexec_fn=die_with_parent, **popen)
    return cast("subprocess.Popen[bytes]", child)  # no `text` in `popen`: bytes (Popen's stubs pick by it)
