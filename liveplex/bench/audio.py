"""Caller audio for the bench: the shipped recording, a WAV file, or synthetic speech.

Audio is produced as int16 samples at the session rate and then put in the session's wire
format. The shipped recording (`data/caller.wav`, 24 kHz mono s16, made with espeak-ng) is the
default, so a run hears real speech without any download.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import wave

import numpy as np
import soxr

from liveplex.bench import synth

SYNTHETIC = "synthetic"
"""The `--input` value that selects seeded synthetic speech (live-contract §13.4)."""

FORMATS = ("audio/pcm",)
"""Wire formats the bench can send: mono s16le at any rate (G.711 is not implemented yet)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """Where the caller audio comes from; picklable, so worker processes rebuild it."""

    path: str | None
    """A mono s16 WAV file; None means the shipped recording."""
    synthetic: bool
    """Synthesise speech per session instead (session `i` uses `seed + i`)."""
    seed: int
    """Seed of the synthetic speech."""

    def describe(self) -> str | None:
        """The report's `input` value: a path, "synthetic", or None for the shipped recording."""
        return SYNTHETIC if self.synthetic else self.path


class AudioError(Exception):
    """The input file cannot be used as caller audio."""


def recording_path() -> str:
    """Filesystem path of the shipped recording."""
    return str(importlib.resources.files("liveplex.bench") / "data" / "caller.wav")


def read_wav(path: str, rate: int) -> np.ndarray:
    """The int16 samples of a mono s16 WAV, resampled to `rate` Hz if it is at another rate.

    Raises `AudioError` naming the file for stereo, non-16-bit or empty files.
    """
    with wave.open(path, "rb") as wav:
        if wav.getnchannels() != 1 or wav.getsampwidth() != 2:
            raise AudioError(f"{path}: need mono 16-bit PCM, got {wav.getnchannels()} channels "
                             f"of {8 * wav.getsampwidth()} bits")
        file_rate = wav.getframerate()
        samples = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
    if len(samples) == 0:
        raise AudioError(f"{path}: no audio")
    if file_rate != rate:
        samples = soxr.resample(samples, file_rate, rate)
    return samples


def pcm(source: Source, rate: int, seconds: float, index: int) -> bytes:
    """Session `index`'s caller audio as s16le bytes at `rate` Hz (looped by the caller)."""
    if source.synthetic:
        return synth.speech(seconds, rate, source.seed + index).astype("<i2").tobytes()
    return _file_pcm(source.path or recording_path(), rate)


@functools.lru_cache(maxsize=4)
def _file_pcm(path: str, rate: int) -> bytes:
    """One shared copy of a file's audio per rate: every session of a level loops the same bytes."""
    return read_wav(path, rate).astype("<i2").tobytes()
