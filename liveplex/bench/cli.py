"""`liveplex bench SUBCOMMAND`: each subcommand is a module with `main(argv) -> int`, imported
lazily so that, for example, `bench duplex` never imports torch."""

from __future__ import annotations

from liveplex import cli
from liveplex.cli import Command

SUBCOMMANDS: cli.Commands = {
    "duplex": Command("liveplex.bench.duplex", "N real-time GPT-Live callers against a server, or a ramp", None),
    "latency": Command("liveplex.bench.latency", "the echo round trip per caller network, adaptive buffer vs fixed",
                       None),
    "baseline": Command("liveplex.bench.baseline", "bare websockets echo server: the pod's physical limit", None),
    "place": Command("liveplex.bench.place", "placements per second through a gateway, and the Redis decision",
                     None),
    "move": Command("liveplex.bench.move", "calls through a gateway while pods drain: do they move unnoticed?",
                    None),
    "engine": Command("liveplex.bench.engine", "PersonaPlex engine ticks without the front end", "personaplex"),
    "kv-fidelity": Command("liveplex.bench.kv_fidelity",
                           "the 8-bit KV ring's logits against a full-precision ring (CPU)", "personaplex"),
    "record": Command("liveplex.bench.record",
                      "what a session's resume record costs the pod per tick, and its size", "personaplex"),
}


def main(argv: list[str]) -> int:
    """Dispatch to the subcommand's module."""
    return cli.dispatch("liveplex bench", SUBCOMMANDS, argv)
