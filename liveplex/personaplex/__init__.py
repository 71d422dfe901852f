"""PersonaPlex-7B in PyTorch: the language model, batched over sessions at different positions.

Modules: `config` (architecture), `model_dir` (a whole checkpoint directory in one call),
`checkpoint` (LM loading), `errors` (the exception root), `slots` (the per-slot state interface),
`ring` (KV ring, attention backends), `temporal`,
`depformer`, `sampling`, `prompt` (layout, schedules, limit), `prefill` (voice prefix, ragged
prefill), `step` (the live step), `mimi` (the codec), `tokenizer`, `voices`. See
docs/personaplex.md.
"""

from liveplex.personaplex.checkpoint import LM, load_lm
from liveplex.personaplex.config import LMConfig
from liveplex.personaplex.errors import CheckpointError
from liveplex.personaplex.model_dir import Model
from liveplex.personaplex.model_dir import load as load_model_dir
from liveplex.personaplex.prompt import DEFAULT_SCHEDULE, Schedule
from liveplex.personaplex.sampling import Sampling

__all__ = [
    "DEFAULT_SCHEDULE", "LM", "CheckpointError", "LMConfig", "Model", "Sampling", "Schedule", "load_lm",
    "load_model_dir",
]
