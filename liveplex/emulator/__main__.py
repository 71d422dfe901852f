"""`python -m liveplex.emulator`: run the development emulator until Ctrl-C (not for production)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from liveplex.emulator.emulator import run_emulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liveplex.emulator",
                                     description="A local Kubernetes stand-in for development; not a real cluster.")
    parser.add_argument("--port", type=int, default=0, help="API server port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--state-dir", default=".liveplex-emulator", help="pod logs and working directories")
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig for the emulator here")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_emulator(args.port, args.state_dir, args.kubeconfig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
