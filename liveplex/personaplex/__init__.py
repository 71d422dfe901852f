"""PersonaPlex-7B in PyTorch: the language model, batched over sessions at different positions.

Modules: `config` (architecture), `checkpoint` (LM loading), `ring` (KV ring), `temporal`,
`depformer`, `sampling`, `prompt` (layout, schedules, limit), `prefill` (voice prefix, ragged
prefill), `step` (the live step), `mimi` (the codec). See docs/personaplex.md.
"""

from liveplex.personaplex.checkpoint import LM, CheckpointError, load_lm
from liveplex.personaplex.config import LMConfig
from liveplex.personaplex.prompt import DEFAULT_SCHEDULE, Schedule
from liveplex.personaplex.sampling import Sampling

__all__ = ["DEFAULT_SCHEDULE", "LM", "CheckpointError", "LMConfig", "Sampling", "Schedule", "load_lm"]
