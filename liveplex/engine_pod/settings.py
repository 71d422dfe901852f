"""The PersonaPlex engine's settings: one frozen value, built once from the command line.

Spec personaplex §5.1. `add_arguments` adds the flags only this engine has; `--max-sessions`,
`--max-seconds`, `--jitter-frames` and `--prebuffer-frames` are shared with the sim engine
(`liveplex.sim_pod.profile`) and read from the same namespace (`--fail-after-ticks`, defined there
too, is `serve`'s: `live/fault.py`). Torch-free, so that parsing `liveplex serve` flags never
imports torch.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from liveplex.flags import default_of
from liveplex.live import groups
from liveplex.personaplex import voice_names

DEFAULT_INSTRUCTIONS = ("You are a wise and friendly teacher. Answer questions or provide advice "
                        "in a clear and engaging way.")
"""The reference's default role prompt (26 tokens with the real tokenizer)."""

DEFAULT_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
"""Batch sizes a tick is padded to (one CUDA graph each); cut at `max_sessions` (spec §5.7)."""

SCHEDULES: tuple[str, ...] = ("reference", "upstream")
"""`personaplex.prompt.Schedule` values (D3)."""

KV_DTYPES: tuple[str, ...] = ("bf16", "fp32", "fp8")
"""`--kv-dtype` values: the weights' own (it must then equal `--dtype`) or `fp8`."""

PARK_COPIES: tuple[str, ...] = ("auto", "spare", "inline")
"""`--park-copies` values: how a pause's state goes to host memory and back (docs/pause.md)."""

ATTENTION: tuple[str, ...] = ("flash", "masked")
"""`personaplex.ring.Backend` values (spec §5.6)."""

DEFAULT_SCHEDULE = "upstream"
"""`personaplex.prompt.DEFAULT_SCHEDULE`: settled by the model package's D3 golden test."""

CPU_MAX_SESSIONS = 4
"""Sessions on a CPU when `--max-sessions` is not given: CPU serving is for tests and demos."""
MAX_COMMENTARY_PIECES = 8
"""Pieces of `step.SAY_TOKENS` commentary ids a session may have waiting; more are dropped (logged)."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How the PersonaPlex engine runs; checked once in `__post_init__`, trusted afterwards."""

    model_dir: Path
    """Checkpoint directory: model.safetensors, the Mimi file, the tokenizer, voices/ (spec §2.1)."""
    device: str = "cpu"
    """`cpu` or `cuda[:n]`."""
    dtype: str = "fp32"
    """LM weights and KV: `bf16` (CUDA) or `fp32`; Mimi is always fp32 (spec §5.8)."""
    kv_dtype: str | None = None
    """The temporal KV ring: None = `dtype`, or `fp8` (e4m3 with fixed per-head scales, half of
    bf16's bytes: `personaplex.kv8`, issue 36)."""
    schedule: str = DEFAULT_SCHEDULE
    """Which user codes enter the fed column (D3, one of `SCHEDULES`); logged at startup."""
    context_frames: int = 3000
    """Temporal window and KV ring length, positions (3000 = 240 s; the weights do not fix it)."""
    max_seconds: float = 240.0
    """Session length, s; 0 = unlimited (D4)."""
    max_sessions: int = 0
    """Slots; 0 = derive from free device memory (CPU: `CPU_MAX_SESSIONS`)."""
    memory_reserve_gib: float = 8.0
    """Device memory kept free for activations, graphs and the allocator, GiB."""
    max_prefill_rows: int = 1024
    """Prompt rows prefilled per tick at most (activation memory); a longer queue is split (D6b)."""
    prefill_budget_ms: float = 0.0
    """Prefill time a tick may spend, ms, at every bucket; 0 = derive it each turn from the steps
    measured per bucket at startup: what the period's steps leave, never under a floor
    (`grouping.budget_s`, the engine's `_budget`)."""
    attention: str | None = None
    """Temporal attention backend (`personaplex.ring.Backend`): `flash` or `masked`; None = `flash`
    on CUDA, `masked` on the CPU (spec §5.6)."""
    buckets: tuple[int, ...] = DEFAULT_BUCKETS
    """Batch buckets before cutting at `max_sessions`."""
    cuda_graphs: bool = True
    """Capture one graph per bucket on CUDA (ignored on CPU)."""
    greedy: bool = False
    """Argmax draws instead of temperature + top-k sampling with spec §1.6's defaults (tests)."""
    seed: int | None = None
    """When set, session seeds derive from it and the session id (reproducible runs)."""
    custom_voices_dir: Path | None = None
    """Extra voices (`.pt`/`.wav`) loaded after the checkpoint's: the front end's `--voice-dir`."""
    default_voice: str = voice_names.DEFAULT_VOICE
    """The voice used when a client names none; startup fails if it is missing."""
    default_instructions: str = DEFAULT_INSTRUCTIONS
    max_voice_frames: int = 250
    """Longest voice prompt accepted at startup, frames (20 s)."""
    jitter_frames: int = 4
    """Jitter buffer cap, frames (live-contract §5.3)."""
    prebuffer_frames: int = 0
    """Frames buffered before playout starts; 0: adaptive (`live/playout.py`), the default."""
    tick_groups: int = 0
    """Tick groups (issue 44): 0 = as many as the measured step leaves room for, chosen each period
    from 1, 2 or 4 (`live.groups.choose`); 1, 2 or 4 = that many, always."""
    park_copies: str = "auto"
    """A pause's host copies (docs/pause.md, "The copy stream"): `spare`, through the spare slot
    on a copy stream beside the ticks (on the CPU the same order, the copies synchronous);
    `inline`, between ticks, the tick's stream waiting for them; `auto`, spare on CUDA."""
    cpu_threads: int = 1
    """Torch intra-op threads when the engine runs on the CPU. 1: the tiny model's ops are too small
    to split, and extra workers spin on the cores the front end and callers need (docs/engine_pod.md)."""

    @property
    def ring_dtype(self) -> str:
        """The temporal KV ring's dtype: `kv_dtype`, else `dtype`."""
        return self.kv_dtype or self.dtype

    @property
    def park_spare(self) -> bool:
        """Whether a pause's copies go through the spare slot (`park_copies`)."""
        return self.park_copies == "spare" or (self.park_copies == "auto" and self.device.startswith("cuda"))

    def __post_init__(self) -> None:
        checks = {
            "device": self.device == "cpu" or self.device.startswith("cuda"),
            "dtype": self.dtype in ("fp32", "bf16"),
            "kv_dtype": self.kv_dtype in (None, self.dtype, "fp8"),
            "schedule": self.schedule in SCHEDULES,
            "context_frames": self.context_frames >= 16,
            "max_seconds": self.max_seconds >= 0,
            "max_sessions": self.max_sessions >= 0,
            "memory_reserve_gib": self.memory_reserve_gib >= 0,
            "max_prefill_rows": self.max_prefill_rows > 0,
            "prefill_budget_ms": self.prefill_budget_ms >= 0,
            "attention": self.attention in (None, *ATTENTION),
            "buckets": bool(self.buckets) and all(b > 0 for b in self.buckets),
            "max_voice_frames": self.max_voice_frames > 0,
            "jitter_frames": self.jitter_frames > 0,
            "prebuffer_frames": 0 <= self.prebuffer_frames <= self.jitter_frames,
            "cpu_threads": self.cpu_threads >= 1,
            "park_copies": self.park_copies in PARK_COPIES,
            "tick_groups": self.tick_groups in (0, *groups.CHOICES),
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid personaplex setting {bad[0]}={getattr(self, bad[0])!r}")


def add_arguments(parser: argparse.ArgumentParser) -> tuple[argparse.Action, ...]:
    """The PersonaPlex engine's own flags on `liveplex serve --engine personaplex`; returned so
    that a run with another engine can say it ignores them."""
    d = EngineSettings
    g = parser.add_argument_group("personaplex engine (also: --max-sessions, --max-seconds)")
    return (
        g.add_argument("--model-path", type=Path, default=None,
                       help="checkpoint directory, required (`liveplex personaplex make-tiny DIR` writes a "
                            "tiny one; default: none)"),
        g.add_argument("--device", default=None, help="cpu or cuda[:n] (default: cuda if available)"),
        g.add_argument("--dtype", choices=["bf16", "fp32"], default=None,
                       help="LM weights and KV (default: bf16 on CUDA, fp32 on CPU)"),
        g.add_argument("--kv-dtype", choices=KV_DTYPES, default=None,
                       help="temporal KV ring: the weights' dtype, or fp8 (e4m3, half of bf16's memory per "
                            "session) (default: --dtype's)"),
        g.add_argument("--schedule", choices=SCHEDULES, default=default_of(d, "schedule"),
                       help="which user codes enter the fed column (default: %(default)s)"),
        g.add_argument("--context-frames", type=int, default=default_of(d, "context_frames"),
                       help="temporal window, positions (default: %(default)s = 240 s; the persona leaves "
                            "it after ~233 s)"),
        g.add_argument("--max-prefill-rows", type=int, default=default_of(d, "max_prefill_rows"),
                       help="prompt rows prefilled per tick (default: %(default)s)"),
        g.add_argument("--prefill-budget-ms", type=float, default=default_of(d, "prefill_budget_ms"),
                       help="prefill time per tick, ms (default: %(default)s = measured, by bucket)"),
        g.add_argument("--attention", choices=ATTENTION, default=None,
                       help="temporal attention backend (default: flash on CUDA, masked on CPU)"),
        g.add_argument("--memory-reserve-gib", type=float, default=default_of(d, "memory_reserve_gib"),
                       help="device memory kept free, GiB (default: %(default)s)"),
        g.add_argument("--no-cuda-graphs", action="store_true", help="run ticks eagerly on CUDA (default: graphs)"),
        g.add_argument("--greedy", action="store_true", help="argmax draws (tests; default: sampling)"),
        g.add_argument("--seed", type=int, default=None, help="derive session seeds from this (default: random)"),
        g.add_argument("--default-voice", default=default_of(d, "default_voice"),
                       help="voice used when a client names none (default: %(default)s)"),
        g.add_argument("--park-copies", choices=PARK_COPIES, default=default_of(d, "park_copies"),
                       help="a pause's host copies: spare (a copy stream beside the ticks, through the spare "
                            "slot), inline (between ticks, the tick waits), auto = spare on CUDA "
                            "(default: %(default)s)"),
        g.add_argument("--cpu-threads", type=int, default=default_of(d, "cpu_threads"),
                       help="torch threads on --device cpu (default: %(default)s)"),
    )


def settings_from_args(args: argparse.Namespace) -> EngineSettings:
    """Build the settings once; raises ValueError naming the bad flag."""
    if args.model_path is None:
        raise ValueError("--engine personaplex needs --model-path DIR")
    if not args.model_path.is_dir():
        raise ValueError(f"--model-path: {args.model_path} is not a directory")
    device = args.device or _default_device()
    if device.startswith("cuda"):
        _check_cuda(device, args.kv_dtype)
    dtype = args.dtype or ("bf16" if device.startswith("cuda") else "fp32")
    if args.kv_dtype not in (None, dtype, "fp8"):
        raise ValueError(f"--kv-dtype {args.kv_dtype}: the KV ring holds the weights' dtype ({dtype}) or fp8")
    return EngineSettings(
        model_dir=args.model_path, device=device, dtype=dtype, kv_dtype=args.kv_dtype,
        schedule=args.schedule, context_frames=args.context_frames,
        max_seconds=args.max_seconds, max_sessions=args.max_sessions or 0,
        memory_reserve_gib=args.memory_reserve_gib, max_prefill_rows=args.max_prefill_rows,
        prefill_budget_ms=args.prefill_budget_ms, attention=args.attention,
        cuda_graphs=not args.no_cuda_graphs, greedy=args.greedy,
        seed=args.seed, custom_voices_dir=args.voice_dir, default_voice=args.default_voice,
        jitter_frames=args.jitter_frames, prebuffer_frames=args.prebuffer_frames,
        cpu_threads=args.cpu_threads, park_copies=args.park_copies,
        tick_groups=0 if args.tick_groups is None else args.tick_groups,
    )


FP8_CAPABILITY = (8, 9)
"""The first CUDA compute capability with e4m3 conversions in hardware (Ada, Hopper): the 8-bit
ring's Triton kernels need it."""


def _check_cuda(device: str, kv_dtype: str | None = None) -> None:
    """Refuse a CUDA device this machine does not have, or an 8-bit ring on a GPU without e4m3,
    naming the flag (torch or Triton would fail later, deep in the checkpoint load or the warm-up)."""
    import torch  # only the personaplex path pays for importing torch

    name, _, index = device.partition(":")
    if name != "cuda" or (index and not index.isdigit()):
        raise ValueError(f"--device must be cpu or cuda[:n], got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: this machine has no CUDA device; use --device cpu")
    count = torch.cuda.device_count()
    if int(index or 0) >= count:
        raise ValueError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    capability = torch.cuda.get_device_capability(int(index or 0))
    if kv_dtype == "fp8" and capability < FP8_CAPABILITY:
        raise ValueError(f"--kv-dtype fp8 needs a GPU with e4m3 (compute capability 8.9 or later: Ada, Hopper); "
                         f"{device} is {capability[0]}.{capability[1]}")


def _default_device() -> str:
    import torch  # only the personaplex path pays for importing torch

    return "cuda" if torch.cuda.is_available() else "cpu"
