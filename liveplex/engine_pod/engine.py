"""`PersonaPlexEngine`: every live session in one batched tick, as a `Ticker` under `drive`.

Spec personaplex §5. Host side of the engine: sessions are leases on preallocated slots
(`leases`), newcomers queue in arrival order and are prefilled at the start of the next ticks
within a budget of prefill time measured at startup, a long prompt split across ticks
(`grouping`, `prefill.admit`); then every running session's caller frame goes through
`program.Program.run(bucket)` and comes back as exactly one 80 ms frame and its text. Text the
caller's app asks the agent to say (`session.commentary.append`) is tokenized here and loaded into
the slot's commentary row one piece at a time (`step.speak` says it on the device). The host
talks to the device through staging buffers (`staging`): caller PCM and prompt blocks go up
asynchronously and one packed output comes down, the tick's one host sync. An exception anywhere in
`tick` propagates: `drive` then calls `abort` (every line gets `Closed(ABORTED)`, every newcomer is
refused) and the engine thread turns not ready (D9).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from liveplex.continuity import errors
from liveplex.engine_pod import buckets, copies, grouping, handover, leases, memory, program, staging
from liveplex.engine_pod import model as model_mod
from liveplex.engine_pod.history import History
from liveplex.engine_pod.settings import CPU_MAX_SESSIONS, MAX_COMMENTARY_PIECES, EngineSettings
from liveplex.live import channel, contract, frames, groups
from liveplex.live.drive import Pending
from liveplex.live.jitter import Jitter, caller_buffer
from liveplex.live.line import Carried, Line
from liveplex.live.pulse import Pulse
from liveplex.personaplex import config, mimi, prefill, prompt, ring, sampling, slots, step, tokenizer, voice_names

logger = logging.getLogger(__name__)

UNLIMITED_FRAMES = 1 << 31
"""`max_seconds = 0`: sessions never expire (about 5 years of frames)."""

@dataclass(frozen=True, slots=True)
class _Landing:
    """A wake through the spare (docs/pause.md "The copy stream"): taken, its rows not yet in a group."""

    sub: channel.LiveSubmission
    parked: Parked


@dataclass(frozen=True, slots=True)
class _Resume:
    """An imported session laid out: its checked state, and the part of its history its prompt
    does not hold."""

    state: handover.Resume
    jitter: Jitter
    """Its caller audio and counters, restored."""
    replay: np.ndarray
    """[n, 17] columns past the ring's first lap (positions `pos - n`..`pos - 1`): replayed a row
    at a time once the prefill is done (a wrapped window cannot be prefilled in one run)."""
    history: History


@dataclass(slots=True)
class _Waiting:
    """A newcomer: taken, laid out, not yet (wholly) prefilled (no `Started` yet)."""

    sub: channel.LiveSubmission
    layout: prompt.Prompt
    prefix: prefill.VoicePrefix
    seed: int
    done: int = 0
    """Prompt rows prefilled so far; while 0 < done < rows it borrows slot `Leases.live`."""
    resume: _Resume | None = None
    """An imported session: its prompt is its history, and this the rest of its state."""
    replayed: int = 0
    """Rows of `resume.replay` run so far."""
    edge: torch.Tensor | None = None
    """An import between replay ticks: its ring's position-0 entry, which padding rows overwrite."""
    group: int = 0
    """The tick group whose slots its prefill borrows while 0 < done < rows."""

    @property
    def left(self) -> int:
        """Rows still to run: prompt rows, then (an import) replay rows."""
        replay = 0 if self.resume is None else len(self.resume.replay) - self.replayed
        return self.layout.columns.shape[0] - self.done + replay


@dataclass(slots=True)
class _Group:
    """One tick group (issue 44): a slot range of the pools run by a `Program` of its own (its CUDA
    graphs), its sessions compact from its first slot (`rows[i]` holds slot `base + i`)."""

    base: int
    leases: leases.Leases
    program: program.Program
    pools: program.Pools
    """The pools' rows base..base + capacity - 1 (views)."""
    buckets: tuple[int, ...]
    rows: list[_Running] = dataclasses.field(default_factory=list)

    @property
    def capacity(self) -> int:
        return self.leases.capacity


@dataclass(slots=True)
class _Running:
    """A session holding a slot: `rows[i]` of a `_Group`, slot `base + i`."""

    id: int
    line: Line
    detok: tokenizer.StreamingDetokenizer
    pos: int
    """Position of the row the next tick runs (the host's copy)."""
    history: History
    """Every column fed since the voice: a handover rebuilds the KV ring from it."""
    key: int
    """Its sampling key (`sampling.key` of its seed), for its resume record's head."""
    waiting: deque[list[int]] = dataclasses.field(default_factory=deque)
    """Commentary ids not yet loaded into the slot, in pieces of at most `step.SAY_TOKENS`."""
    loaded: int = 0
    """Ids of the piece loaded into the slot (its `say_len`)..."""
    said: int = 0
    """...and how many of them it has said (its `say_at`, read back each tick)."""
    recorded: int = -1
    """Frames its resume record covers (`line.checkpoints`); -1: its head is not sent yet;
    `handover.VOID`: void."""


@dataclass(frozen=True, slots=True, eq=False)
class Parked:
    """A paused session (`export(park=True)`, docs/pause.md): every pool's row of its slot in host
    memory (its KV ring, Mimi's state, its token and sampler row: `program.Pools.park`) and its
    host row, unserialized. Woken on the engine that parked it, the rows are copied back into a
    free slot (`take`), so the wake costs a copy, not the prefill of its history an import's blob
    needs; anywhere else it is its blob (`blob`). One wake: the woken session goes on with its host
    row. Through the spare (`--park-copies spare`) its rows are in host memory once `copied` is done."""

    engine: PersonaPlexEngine
    voice: str
    carried: Carried
    """What its line carried (its caller audio and counters)."""
    row: _Running
    """Its host row as it left the batch (its line closed `HANDED_OVER`)."""
    rows: program.HostRows
    copied: copies.Copy
    """The copy that fills `rows` (on the copy stream: read them once it is done)."""

    @property
    def nbytes(self) -> int:
        """The host memory its rows hold, pinned blocks as torch rounds them (`HostRows.held_bytes`):
        what `parked_bytes` and the host budget count."""
        return self.rows.held_bytes

    def blob(self) -> bytes:
        """Its handover blob, as a move's export of the running session would have made it."""
        self.copied.wait()
        return _blob(self.engine, self.voice, self.carried, self.row, self.rows.tokens, self.rows.codec)


def _blob(engine: PersonaPlexEngine, voice: str, carried: Carried, r: _Running, tokens: step.TokenState,
          codec: slots.RowState) -> bytes:
    """`handover.export` of session row `r` that left its line, its slot's token and Mimi rows one-row host copies."""
    return handover.export(
        engine.handover_format, voice, r.line.frames, carried, pos=r.pos, history=r.history,
        detok=r.detok.state(), waiting=[list(p) for p in r.waiting], loaded=r.loaded, said=r.said,
        tokens={f.name: getattr(tokens, f.name)[0].numpy() for f in dataclasses.fields(tokens)},
        codec=[t[0].numpy() for t in codec.tensors()])


def _spec(t: torch.Tensor) -> handover.Spec:
    """A slot row of pool tensor `t` as a blob stores it: its numpy dtype string and shape."""
    return torch.empty(0, dtype=t.dtype).numpy().dtype.str, tuple(t.shape[1:])


def slot_bytes(model: model_mod.Model, settings: EngineSettings) -> memory.SlotBytes:
    """What one session costs on the device: its KV ring in the ring's own element size (one
    byte under `--kv-dtype fp8`), its Mimi state, its token rows."""
    return slot_bytes_of(model.cfg, model.codec, settings.ring_dtype)


def slot_bytes_of(cfg: config.LMConfig, codec: mimi.Mimi, ring_dtype: str) -> memory.SlotBytes:
    """`slot_bytes` of an LM of `cfg` and `codec` with a `ring_dtype` ring (`bench engine --count`
    counts the 7B's shapes with it, on the meta device)."""
    element = model_mod.KV_DTYPES[ring_dtype].itemsize
    return memory.SlotBytes(kv=memory.kv_bytes(cfg.num_layers, cfg.context, cfg.dim, element),
                            mimi=codec.init_state(1).nbytes, tokens=64 * 1024)


def session_cap(model: model_mod.Model, settings: EngineSettings) -> int:
    """`max_sessions` for this device (spec §5.12): derived from free memory on CUDA, counting the
    spare slot (`spare_slots`) and the outputs of every group's graphs (`memory.graph_bytes`)."""
    if not settings.device.startswith("cuda"):
        return settings.max_sessions or CPU_MAX_SESSIONS
    free, _ = torch.cuda.mem_get_info(torch.device(settings.device))
    return cuda_cap(settings, free, slot_bytes(model, settings).total)


def cuda_cap(settings: EngineSettings, free_bytes: int, per_slot: int) -> int:
    """`session_cap` on CUDA with `free_bytes` free and `per_slot` bytes a slot: what the pools
    and graphs the engine allocates leave room for (`bench engine --count` counts the 7B with it)."""
    counts = group_counts(settings)

    def graphs(sessions: int) -> int:
        return memory.graph_bytes(sessions, counts, settings.buckets, program.PACKED_WIDTH * 4)

    return memory.max_sessions(settings.max_sessions, free_bytes, int(settings.memory_reserve_gib * memory.GIB),
                               per_slot, spare_slots(settings), graphs if settings.cuda_graphs else None)


def group_counts(settings: EngineSettings) -> tuple[int, ...]:
    """The group counts the engine builds a layout for (its programs and graphs): all of
    `groups.CHOICES` under a varying G (`--tick-groups 0`), else the one fixed."""
    return groups.CHOICES if settings.tick_groups == 0 else (settings.tick_groups,)


def spare_slots(settings: EngineSettings) -> int:
    """Slots the pools hold beyond `max_sessions`: one, which a varying G's regroup passes its
    cycles of moves through (`leases.permute`) and a pause's copies through the spare go to and
    from (`EngineSettings.park_spare`), one at a time."""
    return int(settings.tick_groups == 0 or settings.park_spare)


def live_info(model: model_mod.Model, settings: EngineSettings, max_sessions: int) -> contract.LiveInfo:
    """What the pod serves: the checkpoint's voices, the derived role-prompt limit (D5), the cap.

    A Moshi checkpoint has one voice, its weights' own, and takes no instructions: it advertises
    PersonaPlex's voice names as the sim does (every one plays that voice, so GPT-Live clients and
    the voice table keep working), no default instructions and a limit of 0, and runs only the
    `upstream` schedule (moshi's `LMGen`; `reference` is NVIDIA's PersonaPlex schedule).
    """
    moshi = model.convention is prompt.Convention.MOSHI
    if moshi and settings.schedule != prompt.Schedule.UPSTREAM.value:
        raise model_mod.StartupError(
            f"schedule {settings.schedule!r}: a Moshi checkpoint runs only the upstream schedule (moshi's LMGen)")
    voices = voice_names.VOICES if moshi else tuple(sorted(model.voices))
    if settings.default_voice not in voices:
        raise model_mod.StartupError(
            f"default voice {settings.default_voice!r} is not among the loaded voices {list(voices)}")
    period = frames.PERIOD_NS
    size = "7b" if model.name == "personaplex-7b" else model.name
    return contract.LiveInfo(
        model=f"{model.convention.value}-{size}",
        sample_rate=frames.SAMPLE_RATE, frame_samples=frames.FRAME_SAMPLES,
        voices=voices, default_voice=settings.default_voice,
        default_instructions="" if moshi else settings.default_instructions,
        max_instructions_chars=model.max_instructions_chars,
        max_sessions=max_sessions,
        max_frames=int(settings.max_seconds * 1e9) // period if settings.max_seconds else UNLIMITED_FRAMES,
        context_frames=model.cfg.context,
        tick_groups=settings.tick_groups or groups.CHOICES[-1],  # the sub-ticks; the engine runs 1, 2 or 4 of them
        engine=(("schedule", settings.schedule), ("device", settings.device), ("dtype", settings.dtype),
                ("kv_dtype", settings.ring_dtype)),
    )


class PersonaPlexEngine:
    """The batched PersonaPlex `Ticker`; build it on the thread that will run `drive`."""

    def __init__(self, model: model_mod.Model, settings: EngineSettings, info: contract.LiveInfo,
                 pulse: Pulse | None = None) -> None:
        self._model = model
        self._settings = settings
        self._info = info
        self._pulse = pulse or Pulse()
        self._device = model.lm.temporal.text_linear.weight.device
        self._schedule = prompt.Schedule(settings.schedule)
        self._sampling = sampling.Sampling(greedy=settings.greedy)
        kv_dtype = model_mod.KV_DTYPES[settings.ring_dtype]
        S = info.max_sessions
        self._most = info.tick_groups
        self._hold = groups.Hold(self._most) if settings.tick_groups == 0 else None
        """The varying G's hysteresis; None: G fixed."""
        counts = group_counts(settings)
        self.pools = program.Pools(model.lm, model.codec, S + spare_slots(settings), kv_dtype)
        """Slots 0..S-1, and the spare S that no tick group holds (`spare_slots`)."""
        self._spare = S
        self._copies = copies.Copies(self._device) if settings.park_spare else None
        """A pause's copies through the spare; None: inline, between ticks (`_wake`)."""
        self._held: copies.Copy | None = None
        """The copy the spare is held for: a park's rows going down or a wake's coming up. It is
        freed at the first tick boundary at which it is done (`_land`)."""
        self._landing: _Landing | None = None
        """The wake whose rows the spare holds (or will once `_held` is done)."""
        self._wakes: deque[_Landing] = deque()
        """Wakes waiting for the spare, in arrival order."""
        self._park_next = False
        """A park found a wake holding the spare: the spare goes to a park before the next wake
        (`_launch`), so parks and wakes alternate while both wait."""
        self._attention = ring.Backend(settings.attention or ("flash" if self._device.type == "cuda" else "masked"))
        self._layouts = {G: [self._group(G, j) for j in range(G)] for G in counts if G <= S}
        """Every group count this engine may run, its groups built once (their programs' graphs)."""
        self._active = max(self._layouts)
        if self._hold is not None:
            self._hold.groups = self._active
        self._pulse.tick_groups = self._active
        self._pcm_stage = staging.Staging((S, frames.FRAME_SAMPLES), torch.float32, self._device)
        self._out_stage = staging.Staging((S, program.PACKED_WIDTH), torch.int32, self._device)
        self._prompt_stage = staging.Staging((prefill.block_numel(settings.max_prefill_rows),), torch.long,
                                             self._device)
        self._buckets = tuple(sorted({b for layout in self._layouts.values() for g in layout for b in g.buckets}))
        """Every group's buckets: the steps measured at startup."""
        self._prefixes = {name: prefill.voice_prefix(model.lm.temporal, v.embeddings.to(self._device), kv_dtype)
                          for name, v in model.voices.items()}
        self._bare = prompt.bare(model.cfg.init_column, model.cfg.dim)
        self._bare_prefix = prefill.voice_prefix(model.lm.temporal, self._bare.voice.to(self._device), kv_dtype)
        self._init_prefix = (None if model.convention is prompt.Convention.PERSONAPLEX else prefill.voice_prefix(
            model.lm.temporal, model.lm.temporal.embed(self._bare.columns.to(self._device)), kv_dtype))
        """Moshi: the KV of position 0 (the INIT column every session starts from), so an import's
        replay starts at position 1 and may be split across ticks like a voiced prompt."""
        persona = model.convention is prompt.Convention.PERSONAPLEX
        self._primed = (prefill.primed_codec_state(model.codec)
                        if persona and self._schedule is prompt.Schedule.UPSTREAM else None)
        self._queue: deque[_Waiting] = deque()
        self._format = self._handover_format()
        self._cost, measured = self._warm_up()
        self._ticks = groups.Steps(measured)
        """A step's seconds by bucket, measured at startup and refined by the steps run: the
        prefill budgets (`grouping.budget_s`) and the groups' rule (`groups.choose`)."""
        self._pulse.kv_capacity = info.max_sessions * model.cfg.context
        logger.info("personaplex engine ready", extra={
            "device": str(self._device), "dtype": settings.dtype, "kv_dtype": settings.ring_dtype,
            "schedule": settings.schedule,
            "attention": self._attention.value, "cuda_graphs": self._groups[0].program.graphs,
            "graphs": sum(g.program.captured for layout in self._layouts.values() for g in layout),
            "tick_groups": settings.tick_groups or "auto", "architecture": model.name,
            "convention": model.convention.value,
            "checkpoint_steps": model.lm.file_steps, "context": model.cfg.context,
            "voices": {n: v.frames for n, v in sorted(model.voices.items())},
            "max_sessions": info.max_sessions, "max_instructions_chars": info.max_instructions_chars,
            "buckets": list(self._buckets), "slot_bytes": self.pools.slot_bytes,
            "step_ms": self._ticks.ms(),
            "prefill_ms_per_row": self._cost.per_row * 1e3})

    def _group(self, G: int, j: int) -> _Group:
        """Group j of G: slots j S / G up to (j + 1) S / G, a program over them."""
        span = groups.spans(self._info.max_sessions, G)[j]
        base, end = span.start, span.stop
        pools = self.pools.view(span)
        run = program.Program(self._model.lm, self._model.codec, pools, self._schedule, self._sampling,
                              self._settings.cuda_graphs, self._attention)
        return _Group(base, leases.Leases(end - base), run, pools, buckets.cut(self._settings.buckets, end - base))

    @property
    def _groups(self) -> list[_Group]:
        """The tick groups run now."""
        return self._layouts[self._active]

    @property
    def tick_groups(self) -> int:
        """The tick groups run now (tests and diagnostics)."""
        return self._active

    def group_of(self, session_id: int) -> int | None:
        """The tick group a running session is in (tests and diagnostics)."""
        return next((j for j, g in enumerate(self._groups) for r in g.rows if r.id == session_id), None)

    @property
    def running(self) -> int:
        """Sessions holding a slot (prefilled)."""
        return sum(len(g.rows) for g in self._groups)

    @property
    def waiting(self) -> int:
        """Newcomers taken but not yet prefilled."""
        return len(self._queue)

    def slot_of(self, session_id: int) -> int | None:
        """The slot a session holds now, if it runs (tests and diagnostics)."""
        found = self._find(session_id)
        return None if found is None else found[0].base + found[1]

    def _find(self, session_id: int) -> tuple[_Group, int] | None:
        for g in self._groups:
            for i, r in enumerate(g.rows):
                if r.id == session_id:
                    return g, i
        return None

    @property
    def host_buffers(self) -> tuple[torch.Tensor, ...]:
        """The staging buffers the host copies through (pinned on CUDA; counted as host memory)."""
        return (self._pcm_stage.host, self._out_stage.host, self._prompt_stage.host)

    def device_tensors(self) -> list[torch.Tensor]:
        """Everything the engine keeps in device memory: weights, pools, voice prefixes, the
        primed decoder (what `liveplex.bench.counts` must know on the CPU)."""
        m = self._model
        found = [t for module in (m.lm.temporal, m.lm.depformer, m.codec) for t in module.state_dict().values()]
        found += self.pools.tensors()  # a group's pools are views of these
        found += [p.kv for p in (*self._prefixes.values(), self._bare_prefix)]
        return found + (self._primed.tensors() if self._primed is not None else [])

    def sessions(self) -> int:
        return self.running + len(self._queue) + len(self._wakes) + (self._landing is not None)

    def take(self, sub: channel.LiveSubmission) -> None:
        """Lay out the session's prompt and queue it for the next tick's prefill (spec §5.4).

        Moshi's prompt is the same empty one for every session (its voice name chooses nothing)."""
        m, s = self._model, self._settings
        if isinstance(sub.state, Parked) and sub.state.engine is self:
            self._wake(sub, sub.state)
            return
        if sub.state is not None:
            self._take_handover(sub)
            return
        if m.convention is prompt.Convention.MOSHI:
            layout, prefix = self._bare, self._bare_prefix
        else:
            voice = m.voices[sub.session.voice]
            role = m.tokenizer.role_ids(sub.session.instructions)
            if voice.frames + 12 + len(role) > m.cfg.context - 2:  # the token-count backstop of §4.4
                logger.warning("role prompt does not fit the window; session refused",
                               extra={"session_id": sub.id, "voice_frames": voice.frames, "role_tokens": len(role)})
                sub.refuse(contract.CloseReason.ABORTED)
                return
            layout = prompt.layout(voice.embeddings, voice.ring_n, voice.ring_next, role, self._schedule)
            prefix = self._prefixes[voice.name]
        seed = secrets.randbits(63) if s.seed is None else (s.seed * 1_000_003 + sub.id) % (1 << 63)
        self._queue.append(_Waiting(sub, layout, prefix, seed))

    def tick(self, skipped: int, group: int = 0, due_ns: int | None = None) -> None:
        """Sub-tick `group` of the period: the turn of the tick group it falls on, if any (`drive`
        passes over the rest). A period's first turn first settles how many groups it runs
        (`_choose`). Then the group closes its ended sessions, prefills newcomers when it is the
        group they join, passes a session whose frame is not whole to the next group's turn
        (`Jitter.later`), runs one frame for each of the others, and moves those whose frames
        wait longer than they need to an earlier group (`Jitter.earlier`). A move copies the
        session's rows to the other group's first free slot. Through the spare, a boundary first
        lands a wake whose copy is done, and after `_choose` starts the next (`_land`, `_launch`)."""
        self._land()
        if group == 0 and self._hold is not None:
            self._choose()
        self._launch()
        j = groups.turn(group, self._active, self._most)
        if j is None:
            return
        g = self._groups[j]
        ended = [(i, reason) for i, r in enumerate(g.rows) if (reason := r.line.listen()) is not None]
        for i, reason in reversed(ended):  # highest first: a moved session is never one that ended
            g.rows[i].line.close(reason)
            self._release(g, i)
        if self._queue:
            self._forget_hung_up()
            if self._queue and self._joining(j) == j:
                self._prefill(j)
        if len(self._groups) > 1:
            after = self._groups[(j + 1) % len(self._groups)]
            for i in reversed(range(len(g.rows))):
                if self._room(after) and g.rows[i].line.jitter.later():
                    self._move(g, i, after)
        if j == 0:  # once a period: it counts every group's rows
            self._pulse.kv_positions = sum(min(r.pos, self._model.cfg.context) for x in self._groups for r in x.rows)
        if g.rows:
            self._step(g, skipped, due_ns)
        if len(self._groups) > 1:
            for i in reversed(range(len(g.rows))):
                earlier = g.rows[i].line.jitter.earlier
                to = self._groups[(j - earlier) % len(self._groups)]
                if earlier and self._room(to):
                    self._move(g, i, to)

    def _step(self, g: _Group, skipped: int, due_ns: int | None) -> None:
        """One frame for every session of group `g`: its bucket of rows from its first slot."""
        B = len(g.rows)
        bucket = buckets.bucket_for(B, g.buckets)
        heard = self._pcm_stage.writable().numpy()
        for i, r in enumerate(g.rows):
            heard[i] = r.line.hear(skipped, due_ns)
            self._commentary(g.base + i, r)
        heard[B:bucket] = 0  # padding rows: silent input at position 0, in free slots only
        self._pcm_stage.send(g.pools.pcm_in[:bucket])
        if bucket > B:
            g.pools.tokens.pos[B:bucket] = 0
        span = min(self._model.cfg.context, max(r.pos for r in g.rows) + 1)
        started = time.perf_counter_ns()
        out = self._out_stage.download(g.program.run(bucket, span).packed[:B]).numpy()  # the one sync
        self._ticks.observe(bucket, (time.perf_counter_ns() - started) / 1e9)
        pcm = out[:, program.PCM].astype("<i2")
        gone: list[tuple[int, bool]] = []
        for i, r in enumerate(g.rows):
            if not out[i, program.FINITE]:  # D9: a non-finite row ends only its own session
                logger.warning("non-finite model output; session aborted", extra={"session_id": r.id})
                r.line.close(contract.CloseReason.ABORTED)
                gone.append((i, True))
                continue
            r.pos += 1
            r.history.append(out[i, program.FED])
            r.said = int(out[i, program.SAID])
            if not r.line.say(pcm[i].tobytes(), r.detok.push(int(out[i, 0]))):
                gone.append((i, False))
            elif r.line.checkpoints:
                self._checkpoint(r, out[i, program.TAIL])
        for i, dirty in reversed(gone):
            if dirty:
                self.pools.reset(slice(g.base + i, g.base + i + 1))
            self._release(g, i)

    def _room(self, g: _Group) -> bool:
        """Whether group `g` has a slot for one more session (a partial prefill keeps one)."""
        return g.leases.live + (self._partial() is g) < g.capacity

    def _move(self, g: _Group, i: int, to: _Group) -> None:
        """Session `i` of group `g` continues in group `to`: its rows copied to `to`'s first free
        slot, its old slot released."""
        slot = self._acquire(to)
        self.pools.move(g.base + i, slot)
        to.rows.append(g.rows[i])
        self._release(g, i)

    def _acquire(self, to: _Group) -> int:
        """The slot a session joining group `to` gets: its first free one (a partial prefill
        there moves up one first)."""
        slot = to.base + to.leases.acquire()
        if self._partial() is to:
            self.pools.move(slot, slot + 1)
        return slot

    def _partial(self) -> _Group | None:
        """The group whose first free slot the queue head's partial prefill borrows, if any."""
        head = self._queue[0] if self._queue else None
        return self._groups[head.group] if head is not None and head.done else None

    def _joining(self, now: int) -> int | None:
        """The group the queue's head joins: the one its partial prefill borrows a slot in, else
        the roomiest (`_roomiest`)."""
        head = self._queue[0]
        return head.group if head.done else self._roomiest(now)

    def _roomiest(self, now: int) -> int | None:
        """Of the groups with room, the one with the fewest sessions (the most headroom), the
        soonest turn from group `now` on ties."""
        G = len(self._groups)
        open_ = [k for k, g in enumerate(self._groups) if self._room(g)]
        return min(open_, key=lambda k: (len(self._groups[k].rows), (k - now) % G), default=None)

    def _choose(self) -> None:
        """A period's start under a varying G: the groups the measured steps leave room for
        (`groups.choose`, held by `groups.Hold`) for the sessions running and queued, with the
        least prefill the queue owes a period; a change regroups (`_regroup`). Not while a
        partial prefill borrows a slot (its group's layout must hold till it completes), nor while
        a copy holds the spare its cycles of moves pass through (a period later)."""
        assert self._hold is not None
        owed = self._cost.of([grouping.head_rows(self._model.cfg.context)]) if self._queue else 0.0
        choice = groups.choose(self._step_s, self.sessions(), owed, frames.PERIOD_NS / 1e9, most=max(self._layouts))
        self._pulse.groups_reason = choice.reason
        G = self._hold.update(choice.groups)
        if G == self._active or self._partial() is not None or self._held is not None:
            return
        logger.info("tick groups changed", extra={"tick_groups": G, "was": self._active, "reason": choice.reason,
                                                  "sessions": self.sessions()})
        self._regroup(G)
        self._pulse.tick_groups = G
        self._pulse.regroups += 1

    def _step_s(self, G: int, rows: int) -> float:
        """One step of `rows` rows in G's groups, at the bucket each runs (a layout's groups cut the
        buckets at their own capacity, so G = 2's 9 rows run its 16, not G = 4's 9)."""
        layout = self._layouts.get(G)
        if layout is None:  # G is more groups than slots
            return math.inf
        return max(self._ticks[buckets.bucket_for(min(rows, g.capacity), g.buckets)] for g in layout)

    def _regroup(self, G: int) -> None:
        """Every running session to its group of the G-group layout (`groups.regroup`: the first new
        turn at or after its old one, within each group's slots), its rows moved through the spare
        slot where the moves form cycles (`leases.permute`); its buffer's steps become the new ones."""
        old, new = self._groups, self._layouts[G]
        turns = groups.phases(self._active, self._most)
        sessions = [(turns[j], g.base + i, r) for j, g in enumerate(old) for i, r in enumerate(g.rows)]
        placed = groups.regroup([t for t, _, _ in sessions], G, self._most, [g.capacity for g in new])
        for g in new:
            g.rows = []
            g.leases = leases.Leases(g.capacity)
        dst_of = {}
        for (_, slot, r), k in zip(sessions, placed, strict=True):
            dst_of[slot] = new[k].base + new[k].leases.acquire()
            new[k].rows.append(r)
            r.line.jitter.regroup(G)
        for move in leases.permute(dst_of, self._info.max_sessions):
            self.pools.move(move.src, move.dst)
        self._active = G

    def _commentary(self, slot: int, r: _Running) -> None:
        """Queue the session's new commentary; load the next piece once the slot said the last."""
        self._queue_commentary(r)
        if r.waiting and r.said >= r.loaded:
            piece = r.waiting.popleft()
            self.pools.tokens.load_commentary(slot, piece)
            r.loaded, r.said = len(piece), 0

    def _queue_commentary(self, r: _Running) -> None:
        """The session's new commentary, tokenized into pieces behind what waits (bounded)."""
        for text in r.line.commentary():
            ids = self._model.tokenizer.encode(text)
            pieces = [ids[i:i + step.SAY_TOKENS] for i in range(0, len(ids), step.SAY_TOKENS)]
            room = MAX_COMMENTARY_PIECES - len(r.waiting)
            if len(pieces) > room:
                logger.warning("commentary backlog full; text dropped", extra={
                    "session_id": r.id, "dropped_ids": sum(len(p) for p in pieces[room:])})
            r.waiting.extend(pieces[:room])

    def abort(self) -> None:
        """After a fault: every running line gets `Closed(ABORTED)`, every newcomer and wake on its way is refused."""
        for g in self._groups:
            for r in g.rows:
                r.line.close(contract.CloseReason.ABORTED)
            g.rows = []
            g.leases = leases.Leases(g.capacity)
        for w in self._queue:
            w.sub.refuse(contract.CloseReason.ABORTED)
        self._queue.clear()
        for landing in (*self._wakes, self._landing):
            if landing is not None:
                landing.sub.refuse(contract.CloseReason.ABORTED)
        self._wakes.clear()
        self._landing = None
        self._pulse.kv_positions = 0

    def _forget_hung_up(self) -> None:
        """Newcomers whose caller hung up while queued leave before more prefill is spent on them,
        answered as a completed prompt's hang-up is: `Started`, then `Closed(HANGUP)` at frame 0
        (counted from where an import ran). Kept, an abandoned long role prompt at the head would
        hold its slot, and every newcomer behind it, to its last row."""
        if not any(w.sub.input.closed for w in self._queue):
            return
        kept: deque[_Waiting] = deque()
        for w in self._queue:
            if not w.sub.input.closed:
                kept.append(w)
                continue
            resume = w.resume
            line = (Line.start(w.sub, resume.jitter, self._info.max_frames, resume.state.frames)
                    if resume is not None
                    else Line.start(w.sub, self._jitter(), self._info.max_frames))
            if line is not None:
                line.listen()  # what the caller sent before hanging up, counted as a tick's listen would
                line.close(contract.CloseReason.HANGUP)
        self._queue = kept

    def _prefill(self, j: int) -> None:
        """Prefill what the budget allows of the queue into group `j`'s free slots, in arrival
        order, in one forward.

        A newcomer whose prompt is then complete gets its slot's codec state and its `Line`, and
        `Started` goes out in the same tick (and flush) as frame 0; its `listen` runs here, so the
        caller audio queued so far is in its jitter buffer before frame 0 reads it (issue 12: a
        newcomer runs `prebuffer` frames behind its caller, not one more), and one that hung up
        meanwhile is closed at once. One left partial keeps its place at the head of the queue. If
        the prefill raises, the newcomers it touched never ran: they are refused `ABORTED`
        (live-contract §10: `server_error`, the socket stays open) and the fault propagates.

        An import's rows past its ring's first lap are replayed a row a forward after its prompt
        (`_replay`), at most what the budget allows a tick; the plan ends with an import cut short there.
        """
        s, g = self._settings, self._groups[j]
        room, budget = g.capacity - g.leases.live, self._budget(j)
        plan = grouping.chunks([w.left for w in list(self._queue)[:room]], budget, self._cost,
                               s.max_prefill_rows, grouping.head_rows(self._model.cfg.context))
        one = self._cost.of([1])
        replay_rows = max(1, int(budget / one)) if one > 0 else s.max_prefill_rows  # each a forward of its own
        first = g.base + g.leases.live
        chunks, steps = [], []
        for i, rows in enumerate(plan):
            w = self._queue[i]
            prompt_rows = min(rows, w.layout.columns.shape[0] - w.done)
            replay = min(rows - prompt_rows, replay_rows)
            if prompt_rows:
                newcomer = prefill.Newcomer(first + i, w.layout, w.prefix, w.seed)
                chunks.append(prefill.Chunk(newcomer, w.done, w.done + prompt_rows))
            steps.append((prompt_rows, replay))
            if prompt_rows + replay < w.left:
                break
        finished = sum(c.last for c in chunks)
        started = time.perf_counter_ns()
        try:
            if finished:
                rows = slice(chunks[0].newcomer.slot, chunks[0].newcomer.slot + finished)
                self.pools.codec.reset(rows)
                if self._primed is not None:
                    self.pools.codec.decoder.copy_rows(rows, self._primed.decoder, slice(0, 1))
            if chunks:
                prefill.admit(self._model.lm.temporal, self._model.lm.depformer, self.pools.kv, self.pools.tokens,
                              chunks, self._schedule, self._sampling, self._attention, self._prompt_stage.upload)
            for i, (_, replay) in enumerate(steps):
                if replay:
                    self._replay(first + i, self._queue[i], replay)
        except BaseException:
            for _ in steps:
                self._queue.popleft().sub.refuse(contract.CloseReason.ABORTED)
            raise
        self._pulse.prefill.observe((time.perf_counter_ns() - started) / 1e9)
        lost = []
        for prompt_rows, _ in steps:
            w = self._queue[0]
            w.done += prompt_rows
            w.group = j
            if w.left:
                if w.resume is not None and w.done == w.layout.columns.shape[0]:  # padding rows write position 0
                    w.edge = self.pools.kv.kv[g.base + g.leases.live, :, 0].clone()
                break
            self._queue.popleft()
            slot = g.base + g.leases.acquire()
            running, started = self._running(w) if w.resume is None else self._resumed(slot, w, w.resume)
            line = running.line
            running.line.jitter.regroup(self._active)  # an import's buffer was made at its take
            if not started:  # nobody listens any more: its slot goes back below (the Line is only its row)
                lost.append(len(g.rows))
            elif (reason := line.listen()) is not None:  # what the caller sent so far is heard this tick
                line.close(reason)
                lost.append(len(g.rows))
            g.rows.append(running)
        for i in reversed(lost):
            self._release(g, i)

    def _budget(self, j: int) -> float:
        """Prefill seconds group `j`'s turn may spend: what the period's steps leave (each group's
        at the bucket it runs once the queue has joined group `j`; `grouping.budget_s`), or
        `--prefill-budget-ms`."""
        if self._settings.prefill_budget_ms:
            return self._settings.prefill_budget_ms / 1e3
        sizes = [len(g.rows) + (len(self._queue) if k == j else 0) for k, g in enumerate(self._groups)]
        steps = sum(self._ticks[buckets.bucket_for(min(n, g.capacity), g.buckets)]
                    for n, g in zip(sizes, self._groups, strict=True) if n)
        return grouping.budget_s(frames.PERIOD_NS / 1e9, steps)

    @torch.no_grad()
    def _replay(self, slot: int, w: _Waiting, rows: int) -> None:
        """Run the next `rows` rows of import `w`'s replay in `slot`, one live-step forward each
        (the window has wrapped: a packed run would overwrite keys its own earlier rows read).
        The ring's position-0 entry is laid back first, as a prompt's chunks lay its voice again."""
        assert w.resume is not None
        temp, replay = self._model.lm.temporal, w.resume.replay
        view = dataclasses.replace(self.pools.kv, kv=self.pools.kv.kv[slot:slot + 1])
        if w.edge is not None:
            view.kv[0, :, 0] = w.edge
        offsets = ring.Offsets.of(view)
        columns = torch.from_numpy(replay[w.replayed:w.replayed + rows].astype(np.int64)).to(self._device)
        first = w.resume.state.pos - len(replay) + w.replayed
        for i in range(rows):
            position = torch.tensor([first + i], device=self._device)
            plan = ring.live_plan(position, view, offsets, self._attention, view.context)
            temp.step(temp.embed(columns[i:i + 1]), position, view, plan)
        w.replayed += rows

    def _running(self, w: _Waiting) -> tuple[_Running, bool]:
        """A prefilled newcomer's row, and whether its `Started` went out (someone listens)."""
        jitter = self._jitter()
        line = Line.start(w.sub, jitter, self._info.max_frames)
        history = History(w.prefix.frames, w.layout.columns.numpy(), self._model.cfg.context)
        row = line or Line(w.sub.input, w.sub.sink, jitter, self._info.max_frames)
        return _Running(w.sub.id, row, self._model.tokenizer.detokenizer(),
                        prompt.start_position(w.layout, self._schedule), history,
                        int(sampling.key(w.seed))), line is not None

    # --- handover (docs/continuity.md): the format is `handover`'s, the slots are the engine's -------

    def export(self, session_id: int, park: bool = False) -> bytes | Parked | Pending | None:
        """Between ticks: the running session's blob (`handover.export`), or with `park` (a pause)
        its slot's rows copied to host memory (`Parked`), and its slot back (see `Ticker.export`).
        None when it does not run, ends anyway at the next tick, or outgrew its history
        (`History.full`: a blob could not rebuild its ring). `Pending.NEXT_TICK` for a wake not yet
        landed, and for a park through the spare while a copy holds it."""
        if park:
            self._park_next = False
        if any(w.sub.id == session_id for w in (*self._wakes, self._landing) if w is not None):
            return Pending.NEXT_TICK
        found = self._find(session_id)
        if found is None:
            return None
        g, i = found
        r, slot = g.rows[i], g.base + i
        if r.history.full:
            logger.warning("session too long to hand over; it stays", extra={"session_id": r.id, "position": r.pos})
            return None
        if park and self._held is not None:
            self._park_next = self._landing is not None
            return Pending.NEXT_TICK
        self._queue_commentary(r)
        carried = r.line.hand_over()
        if carried is None:
            return None
        voice = self._voice(r)
        data = (Parked(self, voice, carried, r, *self._park(slot)) if park else
                _blob(self, voice, carried, r, self.pools.tokens.parked(slot), self.pools.codec.parked(slot)))
        self._release(g, i)
        return data

    def _park(self, slot: int) -> tuple[program.HostRows, copies.Copy]:
        """`slot`'s rows in host memory: copied now (inline), or moved into the spare on the tick's
        stream (a device copy) and copied down from there on the copy stream, the spare held for it
        (the slot is free at once: compaction may move another session into it)."""
        if self._copies is None:
            return self.pools.park(slot), copies.DONE
        self.pools.move(slot, self._spare)
        rows, self._held = self._copies.down(self.pools, self._spare)
        return rows, self._held

    @property
    def handover_format(self) -> handover.Format:
        """What this engine's blobs and records say and must match."""
        return self._format

    @torch.no_grad()
    def _wake(self, sub: channel.LiveSubmission, parked: Parked) -> None:
        """A session this engine parked continues. Inline: its rows copied back now (`_join`), in
        this tick's batch. Through the spare: it waits its turn for the spare (`_launch`), its rows
        go up on the copy stream, and it joins at the first tick boundary its copy is done (`_land`)."""
        if self._copies is None:
            self._join(sub, parked, lambda slot: self.pools.unpark(slot, parked.rows))
            return
        self._wakes.append(_Landing(sub, parked))
        self._launch()

    def _launch(self) -> None:
        """The next wake's rows start up to the spare, once it is free and not a park's turn."""
        if self._held is not None or self._park_next or not self._wakes:
            return
        assert self._copies is not None
        self._landing = self._wakes.popleft()
        self._held = self._copies.up(self.pools, self._spare, self._landing.parked.rows)

    @torch.no_grad()
    def _land(self) -> None:
        """A tick boundary: the spare's copy, if done, frees the spare; a wake's rows there move into
        a group's slot (a device copy on the tick's stream) and it joins (`_join`)."""
        if self._held is None or not self._held.done():
            return
        held, self._held = self._held, None
        held.before(self._device)
        if self._landing is not None:
            landing, self._landing = self._landing, None
            self._join(landing.sub, landing.parked, lambda slot: self.pools.move(self._spare, slot))

    def _join(self, sub: channel.LiveSubmission, parked: Parked, lay: Callable[[int], None]) -> None:
        """A woken session's rows laid into the roomiest group's first free slot (`lay`) and its row
        started where it left, in this tick's batch. Refused `BUSY` when no group has room (`drive`
        admits only below `max_sessions`, counting wakes on their way, so one always has)."""
        j = self._roomiest(0)
        if j is None:
            sub.refuse(contract.CloseReason.BUSY)
            return
        g = self._groups[j]
        slot = self._acquire(g)
        lay(slot)
        jitter = self._jitter()
        Line.restore(jitter, parked.carried)
        line = Line.start(sub, jitter, self._info.max_frames, parked.row.line.frames)
        row = line or Line(sub.input, sub.sink, jitter, self._info.max_frames)
        # its resume record starts over with a head, as an import's does
        g.rows.append(dataclasses.replace(parked.row, id=sub.id, line=row, recorded=-1))
        if line is None:  # nobody listens any more
            self._release(g, len(g.rows) - 1)
        elif (reason := line.listen()) is not None:
            line.close(reason)
            self._release(g, len(g.rows) - 1)

    def _handover_format(self) -> handover.Format:
        """What this engine's blobs and records say and must match (`handover.Format`)."""
        m, s = self._model, self._settings
        if self._init_prefix is not None:  # Moshi: every voice is the weights' own, after INIT
            frames = dict.fromkeys(self._info.voices, self._init_prefix.frames)
        else:
            frames = {name: p.frames for name, p in self._prefixes.items()}
        return handover.Format(
            self._info, {"schedule": s.schedule, "dtype": s.dtype},
            {name: _spec(t) for name, t in self._token_fields()}, tuple(map(_spec, self.pools.codec.tensors())),
            frames, self._init_prefix is not None, m.cfg.text_card, m.cfg.card)

    def _token_fields(self) -> list[tuple[str, torch.Tensor]]:
        return [(f.name, getattr(self.pools.tokens, f.name)) for f in dataclasses.fields(self.pools.tokens)]

    @staticmethod
    def _voice(r: _Running) -> str:
        assert r.line.session is not None, "a running line knows its session"
        return r.line.session.voice

    def _take_handover(self, sub: channel.LiveSubmission) -> None:
        """Queue an imported session like a newcomer whose prompt is its history; a blob that does
        not fit this engine is refused `ABORTED` (logged with its code and parameter)."""
        assert sub.state is not None
        jitter = self._jitter()
        try:
            resume = handover.restore(channel.blob_of(sub.state), self._format, sub.session.voice, jitter)
        except errors.HandoverError as exc:
            logger.warning("handover refused", extra={"session_id": sub.id, "code": exc.code.value,
                                                      "param": exc.param, "reason": exc.message})
            sub.refuse(contract.CloseReason.ABORTED)
            return
        self._queue.append(self._laid_out(sub, resume, jitter))

    def _jitter(self) -> Jitter:
        """The caller's buffer: the sim's (adaptive by default), across the groups run now."""
        s = self._settings
        return caller_buffer(frames.FRAME_SAMPLES, s.prebuffer_frames, s.jitter_frames, frames.PERIOD_NS,
                             self._active, self._pulse.caller_wait)

    def _laid_out(self, sub: channel.LiveSubmission, resume: handover.Resume, jitter: Jitter) -> _Waiting:
        """An imported session as a newcomer whose prompt is its history up to the ring's first
        lap; the rest is replayed (`_replay`)."""
        C, pos = self._model.cfg.context, resume.pos
        prefix = self._init_prefix if self._init_prefix is not None else self._prefixes[sub.session.voice]
        columns = resume.history[prefix.frames - resume.first:]
        pre = max(0, min(pos, C - 1) - prefix.frames)
        layout = prompt.Prompt(torch.empty(prefix.frames, 0), torch.from_numpy(columns[:pre].astype(np.int64)), 0,
                               prefix.frames + pre, torch.from_numpy(columns[-1].astype(np.int64)))
        laid = _Resume(resume, jitter, columns[pre:], History(resume.first, resume.history, C))
        return _Waiting(sub, layout, prefix, 0, resume=laid)

    def _checkpoint(self, r: _Running, tail: np.ndarray) -> None:
        """After a tick of a session a gateway relays: the next piece of its resume record, if due."""
        data, r.recorded = handover.checkpoint(self._format, self._voice(r), r.line.frames, r.recorded, pos=r.pos,
                                               history=r.history, key=r.key, tail=tail)
        if data is not None:
            r.line.checkpoint(data)

    @torch.no_grad()
    def _resumed(self, slot: int, w: _Waiting, resume: _Resume) -> tuple[_Running, bool]:
        """An imported session whose history was just prefilled and replayed into `slot`: load its
        token and Mimi rows, and start its line where it was."""
        state = resume.state
        for name, t in self._token_fields():
            t[slot] = torch.tensor(state.tokens[name], device=self._device)
        if state.codec is not None:
            for t, a in zip(self.pools.codec.tensors(), state.codec, strict=True):
                t[slot] = torch.tensor(a, device=self._device)
        line = Line.start(w.sub, resume.jitter, self._info.max_frames, state.frames)
        detok = self._model.tokenizer.detokenizer()
        detok.restore(*state.detok)
        row = line or Line(w.sub.input, w.sub.sink, resume.jitter, self._info.max_frames)
        return _Running(w.sub.id, row, detok, state.pos, resume.history, int(state.tokens["key"]),
                        deque(state.waiting), state.loaded, state.said), line is not None

    def _release(self, g: _Group, i: int) -> None:
        """Give back session `i` of group `g`; the session in the group's highest slot moves into
        the hole, and a newcomer partway through its prefill there follows the free slot down."""
        move = g.leases.release(i)
        last = g.rows.pop()
        if move is not None:
            self.pools.move(g.base + move.src, g.base + move.dst)
            g.rows[move.dst] = last
        if self._partial() is g:
            self.pools.move(g.base + g.leases.live + 1, g.base + g.leases.live)

    def _warm_up(self) -> tuple[grouping.PrefillCost, dict[int, float]]:
        """Capture every group's graphs into one pool (CUDA) or run the largest bucket once (CPU);
        measure the prefill's cost and, unless `--prefill-budget-ms` sets the budget and G is fixed,
        a step at every bucket (a bucket counts as no faster than a smaller one: a faster reading
        is noise); then reset every pool."""
        widest = self._layouts[min(self._layouts)][0]
        shared = None
        for layout in self._layouts.values():
            for g in layout:
                g.program.capture(list(g.buckets), shared)
                shared = shared or g.program.graph_pool
        largest = self._buckets[-1]
        widest.program.run(largest)  # on the CPU: allocator and kernels warm
        cost = self._measure_prefill()
        ticks: dict[int, float] = {}
        if not self._settings.prefill_budget_ms or self._hold is not None:
            for b in self._buckets:
                ticks[b] = max(self._tick_s(widest.program, b), *ticks.values(), 0.0)
            period = frames.PERIOD_NS / 1e9
            if ticks[largest] > period * (1 - grouping.RESERVE):
                logger.warning("a full pod's tick leaves no prefill time: at full load its ticks run late and "
                               "newcomers prefill at the floor; lower --max-sessions", extra={
                                   "bucket": largest, "tick_ms": round(ticks[largest] * 1e3, 2),
                                   "prefill_floor_ms": round(period * grouping.FLOOR * 1e3, 2)})
        self.pools.reset(slice(0, self.pools.slots))
        return cost, ticks

    def _tick_s(self, run: program.Program, bucket: int) -> float:
        """A step's seconds at `bucket` over the whole ring, host sync included (median of 3)."""
        times = []
        for _ in range(3):
            started = time.perf_counter_ns()
            self._out_stage.download(run.run(bucket).packed)
            times.append((time.perf_counter_ns() - started) / 1e9)
        return statistics.median(times)

    def _measure_prefill(self) -> grouping.PrefillCost:
        """`grouping.PrefillCost.fit` from timed prefills (chunks of a prompt of repeated bare
        columns, at the configured attention backend), three repeats each."""
        rows = max(1, min(2 * grouping.MIN_CHUNK_ROWS, (self._model.cfg.context - 3) // 2,
                          self._settings.max_prefill_rows // 2))
        layout = dataclasses.replace(self._bare, columns=self._bare.columns.expand(2 * rows, -1).contiguous(),
                                     total=2 * rows + 1)
        pair = self.pools.slots >= 2

        def timed(lengths: list[int]) -> float:
            chunks = [prefill.Chunk(prefill.Newcomer(i, layout, self._bare_prefix, 0), 0, n)
                      for i, n in enumerate(lengths)]
            self._sync()
            started = time.perf_counter_ns()
            prefill.admit(self._model.lm.temporal, self._model.lm.depformer, self.pools.kv, self.pools.tokens,
                          chunks, self._schedule, self._sampling, self._attention, self._prompt_stage.upload)
            self._sync()
            return (time.perf_counter_ns() - started) / 1e9

        timed([rows])
        one, double = [timed([rows]) for _ in range(3)], [timed([2 * rows - 1]) for _ in range(3)]
        both = [timed([rows, rows]) for _ in range(3)] if pair else double
        return grouping.PrefillCost.fit(rows, one, double, both)

    def _sync(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)
