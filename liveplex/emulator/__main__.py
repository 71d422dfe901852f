"""`python -m liveplex.emulator`: run the development emulator until Ctrl-C (not for production)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from liveplex import processes
from liveplex.emulator.controllers import podman
from liveplex.emulator.emulator import run_emulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liveplex.emulator",
                                     description="A local Kubernetes stand-in for development; not a real cluster.")
    parser.add_argument("--port", type=int, default=0, help="API server port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--state-dir", default=".liveplex-emulator", help="pod logs and working directories")
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig for the emulator here")
    parser.add_argument("--runtime", choices=podman.RUNTIMES, default="process",
                        help="process: containers as local processes (the default); podman: as podman containers "
                             "from images in local storage (scripts/build-images)")
    args = parser.parse_args(argv)
    processes.obey_stop_signals()  # `liveplex up --kube &` starts us with SIGINT ignored
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        asyncio.run(_until_stopped(run_emulator(args.port, args.state_dir, args.kubeconfig, args.runtime)))
    return 0


async def _until_stopped(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` until SIGINT or SIGTERM cancels it, so its `finally` stops every pod first."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    await main


if __name__ == "__main__":
    sys.exit(main())
