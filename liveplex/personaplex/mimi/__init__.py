"""Mimi, the 24 kHz speech codec of PersonaPlex: batched streaming encode and decode.

API (spec §1.4, §5.3)::

    mimi = mimi.load(path, device, cfg=mimi.mimi_config())    # Mimi, fp32, 8 codebooks
    state = mimi.init_state(max_sessions)                     # MimiState, rows = slots
    rows = state.head(B)                                      # views of slots 0..B-1
    codes = mimi.encode_step(pcm, rows)                       # pcm [B, 1920] float -> [B, 8] int64
    pcm = mimi.decode_step(codes, rows)                       # codes [B, 8] -> [B, 1920] float
    state.reset([slot])                                       # fresh encoder + decoder for a slot
    state.decoder.copy_rows([slot], primed.decoder, [0])      # prime a decoder from a template
    state.copy_rows([dst], state, [src])                      # move a session between slots

Codes are ordered semantic first (agent cb0), then the 7 acoustic codebooks. A row's results do
not depend on the other rows. `write_random(path, cfg, seed)` writes a random checkpoint under the
real key names (for `make-tiny`); `random_mimi(cfg, seed, device)` builds the same codec in memory.
"""

from liveplex.personaplex.mimi.checkpoint import (
    MimiCheckpointError,
    expected_tensors,
    load,
    random_mimi,
    write_random,
)
from liveplex.personaplex.mimi.config import MimiConfig
from liveplex.personaplex.mimi.config import mimi as mimi_config
from liveplex.personaplex.mimi.config import tiny as tiny_config
from liveplex.personaplex.mimi.model import Mimi
from liveplex.personaplex.mimi.state import (
    DecoderState,
    EncoderState,
    MimiState,
    RingState,
)

__all__ = [
    "DecoderState", "EncoderState", "Mimi", "MimiCheckpointError", "MimiConfig", "MimiState",
    "RingState", "expected_tensors", "load", "mimi_config", "random_mimi", "tiny_config", "write_random",
]
