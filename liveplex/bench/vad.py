"""What the idle pause's detector costs per 80 ms frame of one session (`python -m
liveplex.bench.vad`, docs/bench.md "The idle pause's detector"): Silero VAD through `pod.vad` on
the shipped speech recording, on silence (the gate: no model call) and on -20 dBFS noise."""

from __future__ import annotations

import time

import numpy as np

from liveplex.bench import audio
from liveplex.live import frames
from liveplex.pod import vad

ROUNDS = 5


def _cost_us(model: vad.Silero, chunks: list[bytes]) -> tuple[float, float]:
    """The least over `ROUNDS` of µs per frame, and model calls per frame."""
    best = float("inf")
    calls = model.calls
    for _ in range(ROUNDS):
        stream = model.stream()
        began = time.perf_counter_ns()
        for pcm in chunks:
            stream.prob(pcm)
        best = min(best, (time.perf_counter_ns() - began) / 1e3 / len(chunks))
    return best, (model.calls - calls) / ROUNDS / len(chunks)


def main() -> None:
    model = vad.Silero()
    pcm = audio.read_wav(audio.recording_path(), frames.SAMPLE_RATE).astype("<i2").tobytes()
    speech = [pcm[i:i + frames.FRAME_BYTES] for i in range(0, len(pcm) - frames.FRAME_BYTES + 1, frames.FRAME_BYTES)]
    noise = (np.random.default_rng(0).standard_normal(frames.FRAME_SAMPLES * 100) * 3277).astype("<i2").tobytes()
    cases = {"speech (the shipped recording)": speech, "silence": [bytes(frames.FRAME_BYTES)] * 100,
             "noise, -20 dBFS": [noise[i:i + frames.FRAME_BYTES] for i in range(0, len(noise), frames.FRAME_BYTES)]}
    print("| caller audio | µs per frame | model calls per frame |")
    print("|---|---|---|")
    for name, chunks in cases.items():
        us, calls = _cost_us(model, chunks)
        print(f"| {name} | {us:.0f} | {calls:.2f} |")


if __name__ == "__main__":
    main()
