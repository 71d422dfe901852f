"""Mimi's architecture, derived from its file's tensor shapes, as the LM's is (`personaplex.architecture`).

Widths, depths, the FFN width, the codebook width, size and count are read off the shapes by the
same vote (one damaged tensor is reported against the majority when the header is checked). What
shapes cannot tell, the transformers' heads, comes from `config.json`'s `mimi_num_heads` when given,
else from the named codec of the same width (`mimi`: 8 heads of 64, `tiny`: 4 of 8), else from the
real codec's head width, 64, with a note. The rest (strides, kernels, the 250-step window) is the
real codec's: the header check then names any tensor that disagrees. The same shapes give the same
codec whatever else `config.json` holds, or whether there is one. Pure: no torch, no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from liveplex.personaplex import architecture
from liveplex.personaplex.mimi import config

HEAD_DIM = 64
"""The real Mimi's head width (512 / 8), assumed for a width no named codec has."""
_TRANSFORMER = r"(en|de)coder_transformer\.transformer\.layers\.\d+\."
_OBSERVED: architecture.Observed = {
    "filters": (
        (r"encoder\.model\.0\.conv\.conv\.(weight|bias)", 0, 1, 0),
        (r"encoder\.model\.1\.block\.3\.conv\.conv\.weight", 0, 1, 0),
    ),
    "dimension": (
        (_TRANSFORMER + r"self_attn\.in_proj_weight", 1, 1, 0), (_TRANSFORMER + r"self_attn\.in_proj_weight", 0, 3, 0),
        (_TRANSFORMER + r"self_attn\.out_proj\.weight", 0, 1, 0), (_TRANSFORMER + r"linear1\.weight", 1, 1, 0),
        (_TRANSFORMER + r"linear2\.weight", 0, 1, 0), (_TRANSFORMER + r"norm[12]\.(weight|bias)", 0, 1, 0),
        (r"downsample\.conv\.conv\.conv\.weight", 0, 1, 0), (r"upsample\.convtr\.convtr\.convtr\.weight", 0, 1, 0),
        (r"quantizer\.rvq_(first|rest)\.input_proj\.weight", 1, 1, 0),
        (r"quantizer\.rvq_(first|rest)\.output_proj\.weight", 0, 1, 0),
    ),
    "dim_feedforward": ((_TRANSFORMER + r"linear1\.weight", 0, 1, 0), (_TRANSFORMER + r"linear2\.weight", 1, 1, 0)),
    "codebook_dim": (
        (r"quantizer\.rvq_(first|rest)\.input_proj\.weight", 0, 1, 0),
        (r"quantizer\.rvq_(first|rest)\.vq\.layers\.\d+\._codebook\.embedding_sum", 1, 1, 0),
    ),
    "bins": ((r"quantizer\.rvq_(first|rest)\.vq\.layers\.\d+\._codebook\.(embedding_sum|cluster_usage)", 0, 1, 0),),
}
_COUNTED: architecture.Counted = {
    "num_layers": ((r"encoder_transformer\.transformer\.layers\.(\d+)\.", 0),
                   (r"decoder_transformer\.transformer\.layers\.(\d+)\.", 0)),
    "stored_codebooks": ((r"quantizer\.rvq_rest\.vq\.layers\.(\d+)\.", 1),),  # and rvq_first's one
}
_NOT_MIMI = "give the Mimi file of the checkpoint (this one has none of Mimi's tensors that show it)"


@dataclasses.dataclass(frozen=True, slots=True)
class Derived:
    """What a Mimi file says about its codec."""

    cfg: config.MimiConfig | None
    """None when a number could not be derived at all."""
    name: str
    """The named codec of the same numbers (`mimi`, `tiny`) or `custom`."""
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    """What was assumed, for the loader's warning line."""


def derive(shapes: Mapping[str, architecture.Shape], where: str, kwargs: Mapping[str, object] | None = None) -> Derived:
    """The codec of the Mimi file `where` with these tensor shapes; `kwargs`: `config.json`, if any
    (only `mimi_num_heads` is read from it)."""
    numbers, problems = architecture.from_shapes(shapes, where, _OBSERVED, _COUNTED,
                                                 dict.fromkeys((*_OBSERVED, *_COUNTED), _NOT_MIMI))
    notes: list[str] = []
    if problems:
        return Derived(None, "custom", tuple(problems), ())
    values = {field: vote.value for field, vote in numbers.items()}
    key = architecture.MIMI_NUM_HEADS
    given = (kwargs or {}).get(key)
    same = next((make() for make in config.CONFIGS.values() if make().dimension == values["dimension"]), None)
    if given is not None:
        if not (isinstance(given, int) and not isinstance(given, bool) and given > 0
                and values["dimension"] % given == 0):
            fits = [n for n in range(1, values["dimension"] + 1) if values["dimension"] % n == 0]
            problems.append(f"{architecture.CONFIG_FILE}: `{key}` is {given!r}; give a number of heads that "
                            f"splits Mimi's width {values['dimension']}: one of {fits}")
            given = 1
        heads = given
    elif same is not None:
        heads = same.num_heads
    elif values["dimension"] % HEAD_DIM == 0:
        heads = values["dimension"] // HEAD_DIM
        notes.append(f"Mimi num_heads = {heads} assumed (head width {HEAD_DIM})")
    else:
        problems.append(f"{where}: cannot derive Mimi's `num_heads` for width {values['dimension']} (not a multiple "
                        f"of {HEAD_DIM}); give `{key}` in {architecture.CONFIG_FILE}")
        heads = 1
    cfg = config.MimiConfig(filters=values["filters"], dimension=values["dimension"], num_layers=values["num_layers"],
                            num_heads=heads, dim_feedforward=values["dim_feedforward"],
                            codebook_dim=values["codebook_dim"], bins=values["bins"],
                            stored_codebooks=values["stored_codebooks"])
    if cfg.stored_codebooks < cfg.codebooks:
        problems.append(f"{where}: {cfg.stored_codebooks} codebooks; liveplex uses {cfg.codebooks}: give a Mimi "
                        f"file with at least {cfg.codebooks}")
    name = next((n for n, make in config.CONFIGS.items() if make() == cfg), "custom")
    return Derived(cfg, name, tuple(problems), tuple(notes))
