"""`liveplex check`: run the GPT-Live conformance checklist against a server and print one line per check."""

from __future__ import annotations

import argparse
import asyncio
import logging

from liveplex import listen
from liveplex.conformance import probe, target
from liveplex.conformance.checklist import Outcome, Status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="liveplex check",
        description="Check a GPT-Live server against the gpt-live §14 checklist. Exits 1 on any failure.")
    parser.add_argument("--base-url", default=listen.DEFAULT_BASE_URL,
                        help="the server's /v1 base; the socket is BASE/live/sessions (default %(default)s)")
    parser.add_argument("--only", metavar="PATTERN",
                        help="check numbers and ranges (8,22-24) or a glob on check names (start-*)")
    parser.add_argument("--api-key", default="local-key", help="bearer sent when auth is off")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="seconds to wait for any one reply, added to each check's duration")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="checks run at once, never more than the server's max_sessions (default %(default)s)")
    parser.add_argument("--expect-capacity", type=int, metavar="N",
                        help="the server runs with --max-sessions N (else read from /live/stats)")
    parser.add_argument("--idle-guard-s", type=float, metavar="S",
                        help="the server closes silent sockets after S seconds (check 3)")
    parser.add_argument("--expect-max-seconds", type=float, metavar="S",
                        help="the server runs with --max-seconds S (else read from /live/config)")
    parser.add_argument("--auth-token", metavar="T", help="the server requires bearer T (check 2)")
    parser.add_argument("--expect-fault", action="store_true",
                        help="the server injects an engine fault, e.g. --fail-after-ticks (check 37)")
    parser.add_argument("--custom-voice", metavar="ID", help="a custom voice id registered on the server (check 14)")
    parser.add_argument("--expect-store", action="store_true",
                        help="the server stores sessions, e.g. a gateway with --store-dir (check 43)")
    parser.add_argument("--other-api-key", metavar="K",
                        help="a second API key the server accepts: it may not read the first's recording (check 43)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log check internals")
    return parser


def parse_args(argv: list[str]) -> tuple[target.Options, str | None, bool]:
    args = build_parser().parse_args(argv)
    options = target.Options(
        base_url=args.base_url, api_key=args.api_key, timeout_s=args.timeout, concurrency=args.concurrency,
        expect_capacity=args.expect_capacity, idle_guard_s=args.idle_guard_s,
        expect_max_seconds=args.expect_max_seconds, auth_token=args.auth_token,
        expect_fault=args.expect_fault, custom_voice=args.custom_voice, expect_store=args.expect_store,
        other_api_key=args.other_api_key)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG)
    return options, args.only, args.list


def line(number: int, name: str, outcome: Outcome) -> str:
    """One report line: `PASS  8 start-happy  session sess_…`."""
    detail = f"  {outcome.detail}" if outcome.detail else ""
    return f"{outcome.status.value}  {number:2d} {name}{detail}"


async def _check(options: target.Options, only: str | None) -> int:
    from liveplex.conformance import runner  # as `main` does

    selected = runner.select(only)
    if not selected:
        print(f"no check matches {only!r}")
        return 2
    try:
        server = await probe.discover(options)
    except probe.ProbeError as exc:
        print(f"FAIL  cannot read the server's configuration: {exc}")
        return 1
    print(f"checking {options.base_url}: model {server.model!r}, max_sessions {server.max_sessions}, "
          f"max_seconds {server.max_seconds}")
    tgt = target.Target(options, server)
    if tgt.capacity is None:
        print("capacity unknown: checks may meet server_busy; pass --expect-capacity N")
    else:
        print(f"at most {runner.concurrency(tgt)} checks and {tgt.capacity} sockets at once")
    outcomes = await runner.run(selected, tgt)
    for check in selected:
        print(line(check.number, check.name, outcomes[check.number]))
    counts = {status: sum(o.status is status for o in outcomes.values()) for status in Status}
    print(f"{counts[Status.PASS]} passed, {counts[Status.FAIL]} failed, {counts[Status.SKIP]} skipped")
    return 1 if counts[Status.FAIL] else 0


def main(argv: list[str]) -> int:
    options, only, list_only = parse_args(argv)
    from liveplex.conformance import runner  # the checks (the `check` extra): after parsing, so `--help` needs none

    if list_only:
        for check in runner.select(only):
            print(f"{check.number:2d} {check.name}")
        return 0
    return asyncio.run(_check(options, only))
