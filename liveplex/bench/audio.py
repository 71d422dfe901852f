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

from liveplex import cli
from liveplex.bench import synth
from liveplex.bench import talk as talk_mod
from liveplex.gptlive import g711

SYNTHETIC = "synthetic"
"""The `--input` value that selects seeded synthetic speech (live-contract §13.4)."""

FORMATS = ("audio/pcm", "audio/pcmu", "audio/pcma")
"""Wire formats the bench can send: mono s16le, G.711 μ-law and A-law (gpt-live §5.3)."""


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
        with cli.needs("bench"):  # only a file at another rate needs it: the shipped one is at the default 24 kHz
            import soxr
        samples = soxr.resample(samples, file_rate, rate)
    return samples


def wire(source: Source, audio_format: str, rate: int, seconds: float, index: int,
         talk: talk_mod.Talk | None = None) -> bytes:
    """Session `index`'s caller audio in `audio_format` at `rate` Hz (looped by the caller), shaped
    by its talk profile when it has one (`bench.talk`)."""
    if source.synthetic:
        samples = synth.speech(seconds, rate, source.seed + index)
        return _encode(samples if talk is None else talk_mod.shape(samples, talk, rate), audio_format)
    return _file_wire(source.path or recording_path(), audio_format, rate, talk)


@functools.lru_cache(maxsize=4)
def _file_wire(path: str, audio_format: str, rate: int, talk: talk_mod.Talk | None) -> bytes:
    """One shared copy of a file's audio per format and profile: every session of a level loops
    the same bytes."""
    samples = read_wav(path, rate)
    return _encode(samples if talk is None else talk_mod.shape(samples, talk, rate), audio_format)


def _encode(samples: np.ndarray, audio_format: str) -> bytes:
    """int16 samples in the wire format: s16le, or G.711 through the front end's own tables."""
    if audio_format == "audio/pcm":
        return samples.astype("<i2").tobytes()
    table = g711.ULAW_ENCODE if audio_format == "audio/pcmu" else g711.ALAW_ENCODE
    return g711.encode(samples, table)
