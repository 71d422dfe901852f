"""A checkpoint's LM architecture, derived from the checkpoint: its `config.json`, else its tensor shapes.

Every number the tensors carry (widths, layers, FFN widths, audio streams, depformer steps, audio
and text vocabularies) is read off the shapes by a vote over every tensor that shows it, so one
damaged tensor is reported against the majority instead of turning the whole file into
mismatches. What shapes cannot tell (attention heads, the window, the RoPE period) comes from
`config.json` when there is one (moshi's LM kwargs names, `ACCEPTED`), else from the named config
of the same shapes (heads: of the same width), else from Kyutai's conventions (head width 128
temporal, 64 depformer, with a warning; context 3000; period 10000). A `config.json` number that
contradicts the shapes is a problem naming both. Everything found wrong is returned together;
`model_dir` raises it as one `CheckpointError`. Pure: no torch, no files (the caller reads the header and the JSON).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Mapping

from liveplex.personaplex import config

CONFIG_FILE = "config.json"
Shape = tuple[int, ...]

TEMPORAL_HEAD_DIM = 128
DEPFORMER_HEAD_DIM = 64
"""Kyutai's head widths (Moshi 7B: 4096 / 32 and 1024 / 16), assumed when nothing names the heads."""
DEFAULT_CONTEXT = 3000
DEFAULT_MAX_PERIOD = 10000.0

Observed = Mapping[str, tuple[tuple[str, int, int, int], ...]]
"""What each shape-derived number is read from: (key pattern, shape axis, rows per unit, offset);
value = (shape[axis] - offset) / per."""
Counted = Mapping[str, tuple[tuple[str, int], ...]]
"""Numbers counted instead: (pattern whose group 1 is an index, extra); value = max index + 1 + extra."""

_OBSERVED: Observed = {
    "dim": (
        (r"emb\.\d+\.weight", 1, 1, 0), (r"text_emb\.weight", 1, 1, 0), (r"text_linear\.weight", 1, 1, 0),
        (r"out_norm\.alpha", 2, 1, 0), (r"transformer\.layers\.\d+\.self_attn\.in_proj_weight", 1, 1, 0),
        (r"transformer\.layers\.\d+\.self_attn\.out_proj\.weight", 0, 1, 0),
        (r"transformer\.layers\.\d+\.norm[12]\.alpha", 2, 1, 0),
        (r"transformer\.layers\.\d+\.gating\.linear_in\.weight", 1, 1, 0),
        (r"transformer\.layers\.\d+\.gating\.linear_out\.weight", 0, 1, 0), (r"depformer_in\.\d+\.weight", 1, 1, 0),
    ),
    "hidden": (
        (r"transformer\.layers\.\d+\.gating\.linear_in\.weight", 0, 2, 0),
        (r"transformer\.layers\.\d+\.gating\.linear_out\.weight", 1, 1, 0),
    ),
    "card": (
        (r"emb\.\d+\.weight", 0, 1, 1), (r"depformer_emb\.\d+\.weight", 0, 1, 1), (r"linears\.\d+\.weight", 0, 1, 0),
    ),
    "text_card": (
        (r"text_linear\.weight", 0, 1, 0), (r"text_emb\.weight", 0, 1, 1), (r"depformer_text_emb\.weight", 0, 1, 1),
    ),
    "dep_dim": (
        (r"depformer_in\.\d+\.weight", 0, 1, 0), (r"depformer_text_emb\.weight", 1, 1, 0),
        (r"depformer_emb\.\d+\.weight", 1, 1, 0), (r"linears\.\d+\.weight", 1, 1, 0),
        (r"depformer\.layers\.\d+\.norm[12]\.alpha", 2, 1, 0),
        (r"depformer\.layers\.\d+\.self_attn\.(in_proj_weight|out_proj\.weight)", 1, 1, 0),
        (r"depformer\.layers\.\d+\.gating\.\d+\.linear_in\.weight", 1, 1, 0),
        (r"depformer\.layers\.\d+\.gating\.\d+\.linear_out\.weight", 0, 1, 0),
    ),
    "dep_hidden": (
        (r"depformer\.layers\.\d+\.gating\.\d+\.linear_in\.weight", 0, 2, 0),
        (r"depformer\.layers\.\d+\.gating\.\d+\.linear_out\.weight", 1, 1, 0),
    ),
}
_COUNTED: Counted = {
    "num_layers": ((r"transformer\.layers\.(\d+)\.", 0),),
    "dep_num_layers": ((r"depformer\.layers\.(\d+)\.", 0),),
    "n_q": ((r"emb\.(\d+)\.weight", 0),),
    "dep_steps": ((r"linears\.(\d+)\.weight", 0), (r"depformer_in\.(\d+)\.weight", 0),
                  (r"depformer\.layers\.\d+\.gating\.(\d+)\.", 0), (r"depformer_emb\.(\d+)\.weight", 1)),
}
SHAPE_FIELDS: tuple[str, ...] = (*_OBSERVED, *_COUNTED)
"""The `LMConfig` fields the tensor shapes determine."""

_REQUIRED: dict[str, object] = {
    "existing_text_padding_id": config.TEXT_PAD, "causal": True, "layer_scale": None, "gating": "silu",
    "positional_embedding": "rope", "depformer_multi_linear": True, "depformer_weights_per_step": True,
    "depformer_pos_emb": "none", "depformer_gating": "silu", "depformer_layer_scale": None,
    "delays": list(config.DELAYS), "kv_repeat": 1, "depformer_kv_repeat": 1, "text_card_out": None,
    "demux_second_text_stream": False, "demux_second_stream": False, "norm_emb": False, "bias_proj": False,
    "bias_ff": False, "bias_attn": False, "depformer_norm": None, "depformer_weights_per_step_schedule": None,
    "depformer_low_rank_embeddings": None, "extra_heads_num_heads": 0, "quantize": False, "lora": False,
    "cross_attention": False, "conditioners": None, "fuser": None, "lora_name": None, "mimi_config_name": None,
    "tts_config": {}, "stt_config": {},
}
"""moshi kwargs liveplex reads only to check: each must be absent or hold this value (what the
engine computes). `text_card_out` may also equal `text_card`."""
_ALTERNATIVES: dict[str, tuple[object, ...]] = {
    "norm": ("rms_norm_f32", "rms_norm"), "model_type": ("moshi", "personaplex"),
}
"""moshi kwargs with several accepted values (liveplex computes RMSNorm in fp32 either way)."""
_NUMBERS: dict[str, str] = {
    "dim": "dim", "num_heads": "num_heads", "num_layers": "num_layers", "context": "context",
    "max_period": "max_period", "depformer_dim": "dep_dim", "depformer_num_heads": "dep_num_heads",
    "depformer_num_layers": "dep_num_layers", "dep_q": "dep_steps", "n_q": "n_q", "card": "card",
    "text_card": "text_card",
}
"""moshi kwarg -> `LMConfig` field, read as is. `hidden_scale` and `depformer_dim_feedforward`
give `hidden` and `dep_hidden` through moshi's gated-FFN formula."""
_FEEDFORWARD: tuple[str, ...] = ("hidden_scale", "depformer_dim_feedforward")
_HEADS: tuple[tuple[str, str, int], ...] = (
    ("num_heads", "dim", TEMPORAL_HEAD_DIM), ("dep_num_heads", "dep_dim", DEPFORMER_HEAD_DIM))
_MOSHI_NAME: dict[str, str] = {field: key for key, field in _NUMBERS.items()} | dict(
    zip(("hidden", "dep_hidden"), _FEEDFORWARD))
"""`LMConfig` field -> the moshi kwarg that gives it, for messages."""
MIMI_NUM_HEADS = "mimi_num_heads"
"""liveplex's own key (moshi hard-codes Mimi): the codec's attention heads, which its tensors do not
show, for a Mimi width no named codec has (`mimi.architecture`)."""
_IGNORED: tuple[str, ...] = (
    "depformer_context", "depformer_max_period", "lm_gen_config", "model_id", "depformer_causal",
    "moshi_name", "mimi_name", "tokenizer_name",
)
"""Keys that change nothing liveplex computes (the depformer attends every step of a frame and has
no positions; sampling is the engine's; file names are checked by the directory loader)."""
ACCEPTED: tuple[str, ...] = (*_NUMBERS, *_FEEDFORWARD, *_REQUIRED, *_ALTERNATIVES, *_IGNORED, MIMI_NUM_HEADS)
"""Every `config.json` key liveplex knows; any other key is logged and ignored."""


@dataclasses.dataclass(frozen=True, slots=True)
class Derived:
    """What a checkpoint says about its architecture."""

    cfg: config.LMConfig | None
    """None when a number could not be derived at all."""
    name: str
    """The named config of the same widths (`personaplex-7b`, `small`, `tiny`) or `custom`."""
    source: str
    """`config.json` or `tensor shapes`."""
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    """What was assumed or ignored, for one warning line (heads by convention, unknown keys)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Vote:
    value: int
    key: str
    shape: Shape


def _shape(shape: Shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _votes(field: str, shapes: Mapping[str, Shape], observed: Observed, counted: Counted) -> list[Vote]:
    votes = []
    if field in observed:
        for pattern, axis, per, offset in observed[field]:
            for key, shape in shapes.items():
                if re.fullmatch(pattern, key) and axis < len(shape) and (shape[axis] - offset) % per == 0:
                    votes.append(Vote((shape[axis] - offset) // per, key, shape))
    else:
        for pattern, extra in counted[field]:
            found = [(int(m.group(1)), key) for key in shapes if (m := re.match(pattern, key))]
            if found:
                index, key = max(found)
                votes.append(Vote(index + 1 + extra, key, shapes[key]))
    return votes


_GIVE_IN_CONFIG: dict[str, str] = {field: f"give `{key}` in {CONFIG_FILE}" for field, key in _MOSHI_NAME.items()}


def from_shapes(shapes: Mapping[str, Shape], where: str, observed: Observed = _OBSERVED, counted: Counted = _COUNTED,
                remedies: Mapping[str, str] = _GIVE_IN_CONFIG) -> tuple[dict[str, Vote], list[str]]:
    """Each field's majority value (the LM's, or those of the tables given) with a tensor that shows
    it; a problem per field nothing shows, saying what to give (`remedies`, by field)."""
    out, problems = {}, []
    for field in (*observed, *counted):
        votes = _votes(field, shapes, observed, counted)
        if not votes:
            problems.append(f"{where}: cannot derive `{field}`: no tensor shows it; {remedies[field]}")
            continue
        value, _ = collections.Counter(v.value for v in votes).most_common(1)[0]
        out[field] = next(v for v in votes if v.value == value)
    return out, problems


def _matches(cfg: config.LMConfig, numbers: Mapping[str, object]) -> bool:
    return all(getattr(cfg, f) == numbers.get(f) for f in SHAPE_FIELDS if f != "dep_steps")


def name_of(cfg: config.LMConfig) -> str:
    """The named config with the same shapes (any depformer steps and window), else `custom`."""
    numbers = {f: getattr(cfg, f) for f in SHAPE_FIELDS}
    return next((n for n, make in config.CONFIGS.items()
                 if _matches(make(), numbers) and make().num_heads == cfg.num_heads
                 and make().dep_num_heads == cfg.dep_num_heads), "custom")


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def from_moshi_kwargs(kwargs: Mapping[str, object], where: str) -> tuple[dict[str, object], list[str], list[str]]:
    """The `LMConfig` fields a moshi LM kwargs dict gives, the problems, and the unknown keys."""
    problems, fields = [], {}
    for key, want in _REQUIRED.items():
        if key not in kwargs or kwargs[key] == want:
            continue
        if not (key == "text_card_out" and kwargs[key] == kwargs.get("text_card")):
            problems.append(f"{where}: `{key}` is {kwargs[key]!r}; liveplex serves only {want!r}")
    for key, accepted in _ALTERNATIVES.items():
        if key in kwargs and kwargs[key] not in accepted:
            problems.append(f"{where}: `{key}` is {kwargs[key]!r}; liveplex serves only one of {list(accepted)}")
    for key, field in _NUMBERS.items():
        if key in kwargs:
            value = kwargs[key]
            ok = _positive(value) and (field == "max_period" or float(value).is_integer())  # type: ignore[arg-type]
            if not ok:
                kind = "number" if field == "max_period" else "integer"
                problems.append(f"{where}: `{key}` is {value!r}, expected a positive {kind}")
                continue
            fields[field] = float(value) if field == "max_period" else int(value)  # type: ignore[arg-type]
    scale, feedforward = (kwargs.get(k) for k in _FEEDFORWARD)
    if scale is not None and not _positive(scale):
        problems.append(f"{where}: `hidden_scale` is {scale!r}, expected a positive number")
        scale = None
    if feedforward is not None and not (_positive(feedforward) and float(feedforward).is_integer()):  # type: ignore[arg-type]
        problems.append(f"{where}: `depformer_dim_feedforward` is {feedforward!r}, expected one positive integer "
                        "(liveplex serves one FFN width for every depformer step)")
        feedforward = None
    if scale is not None and "dim" in fields:  # moshi: dim_feedforward = int(hidden_scale * dim)
        fields["hidden"] = config.gated_hidden(fields["dim"], int(scale * fields["dim"]))
    if "dep_dim" in fields and (feedforward is not None or scale is not None):  # moshi's default: the same scale
        ff = int(feedforward) if feedforward is not None else int(scale * fields["dep_dim"])  # type: ignore[arg-type, operator]
        fields["dep_hidden"] = config.gated_hidden(fields["dep_dim"], ff)
    unknown = sorted(k for k in kwargs if k not in ACCEPTED)
    return fields, problems, unknown


def _feedforward(dim: int, hidden: int) -> tuple[float, int]:
    """moshi's (`hidden_scale`, `dim_feedforward`) that give the gated width `hidden` for `dim`."""
    for ff in (int(config.HIDDEN_SCALE * dim), (3 * hidden + 1) // 2, 3 * hidden // 2, (3 * hidden + 1) // 2 + 1,
               4 * dim):  # moshi's special case: 4 × dim gives 21 × dim // 8
        if config.gated_hidden(dim, ff) == hidden:
            scale = ff / dim
            while int(scale * dim) < ff:
                scale = math.nextafter(scale, math.inf)
            return scale, ff
    raise ValueError(f"no moshi dim_feedforward gives a gated width of {hidden} for width {dim}")


def to_moshi_kwargs(cfg: config.LMConfig) -> dict[str, object]:
    """moshi `LMModel` kwargs for `cfg` (moshi's `_lm_kwargs` names): a `config.json` liveplex reads back
    as `cfg`, and what builds the same model with moshi's own `get_moshi_lm`."""
    hidden_scale, _ = _feedforward(cfg.dim, cfg.hidden)
    _, dep_feedforward = _feedforward(cfg.dep_dim, cfg.dep_hidden)
    return {
        "dim": cfg.dim, "text_card": cfg.text_card, "existing_text_padding_id": config.TEXT_PAD, "n_q": cfg.n_q,
        "dep_q": cfg.dep_steps, "card": cfg.card, "num_heads": cfg.num_heads, "num_layers": cfg.num_layers,
        "hidden_scale": hidden_scale, "causal": True, "layer_scale": None, "context": cfg.context,
        "max_period": cfg.max_period, "gating": "silu", "norm": "rms_norm_f32", "positional_embedding": "rope",
        "depformer_dim": cfg.dep_dim, "depformer_dim_feedforward": dep_feedforward,
        "depformer_num_heads": cfg.dep_num_heads, "depformer_num_layers": cfg.dep_num_layers,
        "depformer_layer_scale": None, "depformer_multi_linear": True, "depformer_context": cfg.dep_steps,
        "depformer_max_period": 10000, "depformer_gating": "silu", "depformer_pos_emb": "none",
        "depformer_weights_per_step": True, "delays": list(config.DELAYS),
    }




def _assumed_heads(field: str, width: int, head_dim: int, where: str, notes: list[str], problems: list[str]) -> int:
    if width % head_dim:
        problems.append(f"{where}: cannot derive `{field}` for width {width} (not a multiple of {head_dim}); "
                        f"give `{_MOSHI_NAME[field]}` in {CONFIG_FILE}")
        return 1
    notes.append(f"{field} = {width // head_dim} assumed (head width {head_dim})")
    return width // head_dim


def _servable(cfg: config.LMConfig, where: str) -> list[str]:
    """What the engine cannot run, though the file may be a sound moshi checkpoint."""
    problems = []
    streams = 2 * config.AGENT_CODEBOOKS
    if cfg.n_q != streams:
        problems.append(f"{where}: {cfg.n_q} audio streams (`n_q`); liveplex serves {config.AGENT_CODEBOOKS} agent "
                        f"+ {config.AGENT_CODEBOOKS} user codebooks (n_q {streams})")
    if cfg.dep_steps not in (config.AGENT_CODEBOOKS, streams):
        problems.append(f"{where}: {cfg.dep_steps} depformer steps (`dep_q`); liveplex serves "
                        f"{config.AGENT_CODEBOOKS} (Moshi) or {streams} (PersonaPlex)")
    for field, width, _ in _HEADS:
        heads, dim = getattr(cfg, field), getattr(cfg, width)
        even = field == "num_heads"  # RoPE rotates pairs
        if dim % heads or (even and (dim // heads) % 2):
            fits = [n for n in range(1, dim + 1) if dim % n == 0 and not (even and (dim // n) % 2)]
            problems.append(f"{where}: {heads} heads (`{_MOSHI_NAME[field]}`) do not split width {dim} into "
                            f"{'even ' if even else ''}head widths; give `{_MOSHI_NAME[field]}` in {CONFIG_FILE} "
                            f"as one of {fits}")
    if cfg.text_card <= config.TEXT_PAD:
        problems.append(f"{where}: a text vocabulary of {cfg.text_card} has no PAD id {config.TEXT_PAD}")
    return problems


def _against_shapes(fields: Mapping[str, object], numbers: Mapping[str, Vote]) -> list[str]:
    """A problem per `config.json` number the tensors contradict, naming a tensor that shows it."""
    return [f"{CONFIG_FILE}: `{_MOSHI_NAME[field]}` gives {field} {fields[field]}, but the tensors have "
            f"{vote.value} (`{vote.key}` is {_shape(vote.shape)}); give the tensors' value or leave "
            f"`{_MOSHI_NAME[field]}` out"
            for field, vote in numbers.items() if field in fields and fields[field] != vote.value]


def derive(shapes: Mapping[str, Shape], lm_name: str, kwargs: Mapping[str, object] | None = None) -> Derived:
    """The architecture of the LM file `lm_name` with these tensor shapes and, if given, its `config.json`."""
    source = CONFIG_FILE if kwargs is not None else "tensor shapes"
    numbers, problems = from_shapes(shapes, lm_name)
    notes: list[str] = []
    fields: dict[str, object] = {}
    if kwargs is not None:
        fields, config_problems, unknown = from_moshi_kwargs(kwargs, CONFIG_FILE)
        problems += config_problems + _against_shapes(fields, numbers)
        if unknown:
            notes.append(f"{CONFIG_FILE} keys ignored: {', '.join(unknown)}")
    values: dict[str, object] = {f: v.value for f, v in numbers.items()} | fields
    if any(f not in values for f in SHAPE_FIELDS):
        return Derived(None, "custom", source, tuple(problems), tuple(notes))
    named = next((make() for make in config.CONFIGS.values() if _matches(make(), values)), None)
    for field, width, head_dim in _HEADS:
        if field not in values:  # a named size of the same width splits it the same way
            same = next((make() for make in config.CONFIGS.values() if getattr(make(), width) == values[width]), None)
            values[field] = (getattr(same, field) if same is not None else
                             _assumed_heads(field, values[width], head_dim, lm_name, notes, problems))  # type: ignore[arg-type]
    values.setdefault("context", named.context if named is not None else DEFAULT_CONTEXT)
    values.setdefault("max_period", named.max_period if named is not None else DEFAULT_MAX_PERIOD)
    cfg = config.LMConfig(**values)  # type: ignore[arg-type]
    problems += _servable(cfg, lm_name)
    return Derived(cfg, name_of(cfg), source, tuple(problems), tuple(notes))
