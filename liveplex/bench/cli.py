"""`liveplex bench SUBCOMMAND`: each subcommand is a module with `main(argv) -> int`, imported
lazily so that, for example, `bench duplex` never imports torch."""

from __future__ import annotations

from liveplex import cli

SUBCOMMANDS: cli.Commands = {
    "duplex": ("liveplex.bench.duplex", "N real-time GPT-Live callers against a server, or a ramp"),
    "latency": ("liveplex.bench.latency", "the echo round trip per caller network, adaptive buffer vs fixed"),
    "baseline": ("liveplex.bench.baseline", "bare websockets echo server: the pod's physical limit"),
    "place": ("liveplex.bench.place", "placements per second through a gateway, and the Redis decision"),
    "move": ("liveplex.bench.move", "calls through a gateway while pods drain: do they move unnoticed?"),
    "engine": ("liveplex.bench.engine", "PersonaPlex engine ticks without the front end"),
    "record": ("liveplex.bench.record", "what a session's resume record costs the pod per tick, and its size"),
}


def main(argv: list[str]) -> int:
    """Dispatch to the subcommand's module."""
    return cli.dispatch("liveplex bench", SUBCOMMANDS, argv)
