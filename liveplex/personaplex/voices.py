"""Voice prompts: `.pt` files (embeddings + token ring) and `.wav` clips turned into the same thing.

A voice is N precomputed input embeddings (columns 0..N-1 of the voice phase) plus the two token
columns that follow them: column N (all 17 streams) and the delay-1 streams of column N+1 (spec
§4.2). The `.pt` form stores the reference's 4-column ring (slot = column mod 4); a `.wav` is
encoded by a fresh Mimi and laid out by the same column rules, so both condition the model alike.
Every failure is a `VoiceError` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from liveplex.personaplex import config, errors
from liveplex.personaplex.mimi import model as mimi_model

RING_SLOTS = 4
"""Columns in the reference's token ring."""
TARGET_LUFS = -24.0
"""Loudness a `.wav` voice is normalised to (ITU-R BS.1770), as the reference does."""

_DELAYED = torch.tensor(config.DELAYS, dtype=torch.bool)
_PT_KEYS = ("embeddings", "cache")


class VoiceError(errors.CheckpointError):
    """A voice file is unreadable or malformed; the message names the file and the field."""


@dataclasses.dataclass(frozen=True, slots=True)
class Voice:
    """One voice prompt, ready for the prompt layout (spec §4.3)."""

    name: str
    """The file stem (`NATF2`)."""
    embeddings: torch.Tensor
    """[N, dim] summed input embeddings of voice-phase columns 0..N-1, in the stored float dtype."""
    ring_n: torch.Tensor
    """[17] int64: column N, all streams."""
    ring_next: torch.Tensor
    """[17] int64: column N+1; only its delay-1 streams are meaningful, the others hold INIT."""

    @property
    def frames(self) -> int:
        """N: positions the voice occupies."""
        return self.embeddings.shape[0]


Embed = Callable[[torch.Tensor], torch.Tensor]
"""Sum of the 17 stream embeddings: [N, 17] int64 -> [N, dim] (the LM's `Temporal.embed`)."""


def _check_ids(where: str, field: str, column: torch.Tensor, streams: torch.Tensor, limits: torch.Tensor) -> None:
    bad = streams & ((column < 0) | (column > limits))
    if bad.any():
        stream = int(bad.nonzero()[0, 0])
        raise VoiceError(f"{where}: `{field}` stream {stream} holds id {int(column[stream])}, "
                         f"outside 0..{int(limits[stream])}")


def _read_dict(where: str, source: Path | BinaryIO) -> dict[str, object]:
    # torch.save writes a zip; anything else would reach the legacy unpickler, whose errors on
    # foreign bytes are arbitrary. A truncated file has lost its zip directory and fails here too.
    if not zipfile.is_zipfile(source):
        raise VoiceError(f"{where}: not a readable torch.save zip file (truncated, or another format)")
    if not isinstance(source, Path):
        source.seek(0)
    try:
        data = torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise VoiceError(f"{where}: refused by weights_only: not a plain dict of tensors ({exc})") from None
    except Exception as exc:  # a damaged archive member: torch raises several unrelated types
        raise VoiceError(f"{where}: not a readable torch.save zip file, corrupt ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise VoiceError(f"{where}: expected a dict of tensors with keys {list(_PT_KEYS)}")
    return data


def read_pt(source: Path | BinaryIO, name: str, *, cfg: config.LMConfig, max_frames: int,
            where: str | None = None) -> Voice:
    """Read and validate a `.pt` voice (spec §4.2 form A) for the LM `cfg`.

    `embeddings` must be [N, 1, 1, dim] floats with 1 <= N <= max_frames; `cache` the token ring,
    [1, 17, 4] int64; the ids in column N and in column N+1's delay-1 streams in range (at most
    the stream's INIT id: `cfg.text_card` for text, `cfg.card` for audio).
    """
    dim = cfg.dim
    where = where or str(source)
    data = _read_dict(where, source)
    for key in _PT_KEYS:
        if key not in data:
            raise VoiceError(f"{where}: missing `{key}`")
    embeddings, cache = data["embeddings"], data["cache"]
    assert isinstance(embeddings, torch.Tensor) and isinstance(cache, torch.Tensor)
    if embeddings.dim() != 4 or tuple(embeddings.shape[1:]) != (1, 1, dim) or not embeddings.is_floating_point():
        raise VoiceError(f"{where}: `embeddings` is {list(embeddings.shape)} {embeddings.dtype}, "
                         f"expected [N, 1, 1, {dim}] floats")
    frames = embeddings.shape[0]
    if not 1 <= frames <= max_frames:
        raise VoiceError(f"{where}: `embeddings` has N = {frames} frames, expected 1..{max_frames}")
    if tuple(cache.shape) != (1, config.NUM_STREAMS, RING_SLOTS) or cache.dtype != torch.int64:
        raise VoiceError(f"{where}: `cache` is not a token ring: {list(cache.shape)} {cache.dtype}, "
                         f"expected [1, {config.NUM_STREAMS}, {RING_SLOTS}] int64")
    init = torch.tensor(cfg.init_column, dtype=torch.long)
    ring_n = cache[0, :, frames % RING_SLOTS].clone()
    ring_next = torch.where(_DELAYED, cache[0, :, (frames + 1) % RING_SLOTS], init)
    _check_ids(where, "cache", ring_n, torch.ones_like(_DELAYED), init)
    _check_ids(where, "cache", ring_next, _DELAYED, init)
    return Voice(name, embeddings.reshape(frames, dim), ring_n, ring_next)


def wav_columns(codes: torch.Tensor, init: tuple[int, ...]) -> torch.Tensor:
    """Voice-phase columns 0..F from the Mimi codes [F, 8] of F frames (spec §4.2 form B, step 3);
    `init` is the LM's INIT column (`LMConfig.init_column`: its text INIT is its vocabulary size).

    Column 0 is all INIT (frame 0 is dropped, as in the reference); column 1 has PAD, agent cb0
    of frame 1, user cb0 SINE[0] and INIT delay-1 streams; column c >= 2 has PAD, agent cb0 of
    frame c, agent cb1..7 of frame c-1 and user SINE. Column F holds only its delay-1 streams
    (agent cb1..7 of frame F-1, SINE[1..7]); its other streams are INIT.
    """
    frames = codes.shape[0]
    sine = torch.tensor(config.SINE, dtype=torch.long)
    columns = torch.tensor(init, dtype=torch.long).repeat(frames + 1, 1)
    for c in range(1, frames + 1):
        if c < frames:
            columns[c, 0] = config.TEXT_PAD
            columns[c, 1] = codes[c, 0]
            columns[c, 9] = sine[0]
        if c >= 2:
            columns[c, 2:9] = codes[c - 1, 1:]
            columns[c, 10:] = sine[1:]
    return columns


def _read_wav(path: Path) -> np.ndarray:
    """Mono float64 at 24 kHz, loudness-normalised to -24 LUFS."""
    import pyloudnorm
    import soundfile
    import soxr

    try:
        audio, rate = soundfile.read(str(path), dtype="float64", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise VoiceError(f"{path}: not a readable audio file ({exc})") from None
    mono = audio.mean(axis=1)
    if rate != 24000:
        mono = soxr.resample(mono, rate, 24000)
    meter = pyloudnorm.Meter(24000)
    if mono.shape[0] < meter.block_size * 24000:
        raise VoiceError(f"{path}: audio is {mono.shape[0] / 24000:.2f} s, too short to measure loudness")
    loudness = meter.integrated_loudness(mono)
    if not np.isfinite(loudness):
        raise VoiceError(f"{path}: audio is silent")
    return pyloudnorm.normalize.loudness(mono, loudness, TARGET_LUFS)


def read_wav(path: Path, mimi: mimi_model.Mimi, embed: Embed, *, init: tuple[int, ...], max_frames: int) -> Voice:
    """Convert a `.wav` clip to a voice with a fresh batch-1 Mimi encoder (spec §4.2 form B)."""
    audio = torch.from_numpy(_read_wav(path)).float()
    frame = mimi.cfg.frame_samples
    frames = -(-audio.shape[0] // frame)
    if not 2 <= frames <= max_frames + 1:
        raise VoiceError(f"{path}: {frames} frames give N = {frames - 1}, expected 1..{max_frames}")
    audio = torch.nn.functional.pad(audio, (0, frames * frame - audio.shape[0]))
    state = mimi.init_state(1)
    device = mimi.device
    codes = torch.stack([
        mimi.encode_step(audio[f * frame:(f + 1) * frame].to(device)[None], state)[0].cpu()
        for f in range(frames)
    ])
    columns = wav_columns(codes, init)
    with torch.no_grad():
        embeddings = embed(columns[:-2].to(device)).cpu()
    return Voice(path.stem, embeddings, columns[-2], columns[-1])


@dataclasses.dataclass(frozen=True, slots=True)
class WavConverter:
    """What a `.wav` voice needs: the codec and the LM's embedding sum."""

    mimi: mimi_model.Mimi
    embed: Embed


def load_voices(model_dir: Path, *, cfg: config.LMConfig, max_frames: int, custom_dir: Path | None = None,
                wav: WavConverter | None = None) -> dict[str, Voice]:
    """Every voice by stem: `model_dir/voices/` (else the `.pt` members of `voices.tgz`, read without
    extracting), then `custom_dir`. A `.wav` needs `wav`; a stem seen twice is an error."""
    voices: dict[str, Voice] = {}

    def add(voice: Voice, where: str) -> None:
        if voice.name in voices:
            raise VoiceError(f"{where}: a voice named {voice.name!r} is already loaded")
        voices[voice.name] = voice

    def scan(directory: Path) -> None:
        for path in sorted(directory.iterdir()):
            if path.suffix == ".pt":
                add(read_pt(path, path.stem, cfg=cfg, max_frames=max_frames), str(path))
            elif path.suffix == ".wav":
                if wav is None:
                    raise VoiceError(f"{path}: a .wav voice needs Mimi and the LM embeddings to convert")
                add(read_wav(path, wav.mimi, wav.embed, init=cfg.init_column, max_frames=max_frames), str(path))

    voices_dir, archive = model_dir / "voices", model_dir / "voices.tgz"
    if voices_dir.is_dir():
        scan(voices_dir)
    elif archive.is_file():
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".pt"):
                    where = f"{archive}:{member.name}"
                    stream = tar.extractfile(member)
                    assert stream is not None
                    add(read_pt(io.BytesIO(stream.read()), Path(member.name).stem, cfg=cfg,
                                max_frames=max_frames, where=where), where)
    if custom_dir is not None:
        scan(custom_dir)
    return voices
