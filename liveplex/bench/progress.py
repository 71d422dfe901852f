"""The live progress line on stderr while a level runs."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

TTY_PERIOD_S = 0.5
"""Refresh period on a terminal, where the line is redrawn in place."""

LOG_PERIOD_S = 5.0
"""Period when stderr is a file or a CI log: one line each time."""

Counts = Callable[[], tuple[int, int, int, int]]
"""Returns live (started, ok, failed, frames)."""


async def show(label: str, sessions: int, counts: Counts) -> None:
    """Redraw `label`'s progress until cancelled; owned and cancelled by the level runner."""
    tty = sys.stderr.isatty()
    began = time.perf_counter()
    try:
        while True:
            await asyncio.sleep(TTY_PERIOD_S if tty else LOG_PERIOD_S)
            started, ok, failed, frames = counts()
            line = (f"  {label}: {time.perf_counter() - began:6.1f} s  started {started}/{sessions}"
                    f"  ok {ok}  failed {failed}  frames {frames}")
            sys.stderr.write(f"\r{line}\x1b[K" if tty else line + "\n")
            sys.stderr.flush()
    finally:
        if tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
