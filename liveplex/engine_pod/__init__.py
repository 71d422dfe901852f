"""The PersonaPlex engine pod: every live session in one batched tick, behind the live contract.

Modules: `settings` (flags, frozen settings), `model` (checkpoint directory -> resident model),
`leases` (compact slot leases), `grouping` (which newcomers a tick prefills), `buckets`,
`memory` (the session cap), `program` (device pools and the per-bucket tick program),
`engine` (`PersonaPlexEngine`, the `Ticker`: batching), `handover` (its blobs and resume records),
`history`, `pod` (start-up for `liveplex serve`).
See docs/engine_pod.md.

This package's own import stays torch-free (parsing `liveplex serve` flags must not load torch):
only the pure modules are re-exported here; import `engine`, `model`, `program` and `pod` as
modules.
"""

from liveplex.engine_pod.buckets import bucket_for, cut
from liveplex.engine_pod.grouping import PrefillCost, budget_s, chunks
from liveplex.engine_pod.leases import LeaseError, Leases, Move
from liveplex.engine_pod.memory import CapacityError, SlotBytes, kv_bytes, max_sessions
from liveplex.engine_pod.settings import EngineSettings, add_arguments, settings_from_args

__all__ = [
    "CapacityError", "EngineSettings", "LeaseError", "Leases", "Move", "SlotBytes",
    "PrefillCost", "add_arguments", "bucket_for", "budget_s", "chunks", "cut", "kv_bytes", "max_sessions",
    "settings_from_args",
]
