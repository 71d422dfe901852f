"""The caller's speech probability per 80 ms frame, for the wake machine (`pod.wake`, issue 43).

Silero VAD (the `silero-vad` package, which ships its model) run by onnxruntime on the pod's
event loop: its bundled `silero_vad_op18_ifless.onnx` at 8 kHz, the cheapest of the files it
ships on one CPU thread (docs/bench.md, "Pause": about 130 µs a 32 ms chunk, against 250 µs for
the default ONNX file and 300 µs for its TorchScript). The package's own module imports torch, so
the file is found without importing it. 24 kHz caller audio becomes 8 kHz by averaging each three
samples (a box filter: cheap, and enough for a detector). A frame quieter than `GATE_RMS` is not
speech and costs no model call (a paused caller is mostly silence); the detector's state starts
over after such a frame, so each burst is judged from its own start. A burst's first frame is
judged on the windows that end where it ends (its first 16 ms, before them, is their context
only): a burst begins somewhere inside that frame, so its speech is at the frame's end, and judged
there a wake is decided on the first frame of speech more often (docs/bench.md, "Wake latency:
the detector's first frame").

`pip install 'liveplex[pause]'` and `pip install --no-deps silero-vad` (its declared torch would
replace the pinned one).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from liveplex import cli
from liveplex.live import frames

Samples = npt.NDArray[np.float32]

MODEL_FILE = "silero_vad_op18_ifless.onnx"
RATE = 8000
CHUNK = 256
"""Samples per model call at 8 kHz (32 ms), the only size the model takes."""
CONTEXT = 32
"""Samples of the previous chunk each call sees first (Silero's own wrapper does the same)."""
DECIMATE = frames.SAMPLE_RATE // RATE
GATE_RMS = 0.003
"""About -50 dBFS: below it a frame is not speech, without asking the model."""
INSTALL = cli.install_line(("pause",))


class Detector(Protocol):
    """One session's detector: the speech probability (0..1) of each caller frame, in order."""

    def prob(self, pcm: bytes, enough: float = math.inf) -> float:
        """One 80 ms frame of 24 kHz s16le; `enough`: a probability that decides the frame (the
        wake threshold), at which the detector may answer without judging the rest of it."""
        ...


def model_path() -> Path:
    """The ONNX file the `silero-vad` package ships, found without importing the package (it
    imports torch); `ModuleNotFoundError` with the install line when it is missing."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the idle pause needs Silero VAD: {INSTALL}", name="silero_vad")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / MODEL_FILE
    if not path.is_file():
        raise ModuleNotFoundError(f"silero-vad has no {MODEL_FILE}: {INSTALL}", name="silero_vad")
    return path


def require() -> None:
    """Raise `ModuleNotFoundError` naming the module when the detector cannot run here (what
    `cli.needs("pause")` turns into the one line naming the install); found without importing."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise ModuleNotFoundError(f"the idle pause needs onnxruntime: {INSTALL}", name="onnxruntime")
    model_path()


def missing() -> str | None:
    """Why this process cannot run the detector (what to install), None when it can: found
    without importing anything, so a pod that never pauses pays nothing to ask."""
    try:
        require()
    except ModuleNotFoundError as exc:
        return str(exc)
    return None


class Silero:
    """The model, loaded once per pod; `stream()` is one session's `Detector`."""

    def __init__(self) -> None:
        try:
            import onnxruntime as ort  # noqa: PLC0415 (an extra: loaded only by pods that pause)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"the idle pause needs onnxruntime: {INSTALL}", name="onnxruntime") from exc
        options: Any = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # the shipped file's unused initializers warn at every load
        self._session: Any = ort.InferenceSession(str(model_path()), sess_options=options,
                                                  providers=["CPUExecutionProvider"])
        self._rate = np.array(RATE, dtype=np.int64)
        self.calls = 0
        """Model calls so far (what the gate saved shows against the frames judged)."""

    def stream(self) -> SileroStream:
        return SileroStream(self)

    def run(self, chunk: Samples, state: Samples) -> tuple[float, Samples]:
        """One call: `chunk` is `CONTEXT + CHUNK` samples; the probability and the next state."""
        self.calls += 1
        out, state = self._session.run(None, {"input": chunk[None, :], "state": state, "sr": self._rate})
        return float(out[0, 0]), state


def _constant(a: Samples) -> Samples:
    a.flags.writeable = False
    return a


_ZERO_STATE = _constant(np.zeros((2, 1, 128), np.float32))
_NO_TAIL = _constant(np.zeros(0, np.float32))
_NO_CONTEXT = _constant(np.zeros(CONTEXT, np.float32))
"""A stream's start (shared, read-only: each is replaced, never written, as the stream goes on)."""


class SileroStream:
    """One session's `Detector`: the model's state and the 8 kHz samples not yet judged."""

    _state: Samples
    _tail: Samples
    _context: Samples

    def __init__(self, model: Silero) -> None:
        self._model = model
        self._start_over()

    def _start_over(self) -> None:
        self._state, self._tail, self._context = _ZERO_STATE, _NO_TAIL, _NO_CONTEXT

    def prob(self, pcm: bytes, enough: float = math.inf) -> float:
        """The frame's best window; with `enough`, the first window that reaches it, the rest of
        the frame left unjudged (`Pausing.append` passes the threshold: the frame is speech either
        way, and the next frame it judges comes after the hangover's unjudged ones, so the samples
        left would not join it anyway; the model's state goes on, warm)."""
        x = np.frombuffer(pcm, "<i2").astype(np.float32) * (1 / 32768)
        if x.size == 0 or float(np.sqrt(np.mean(x * x))) < GATE_RMS:
            self._start_over()  # no allocation: a paused caller's silence is most frames
            return 0.0
        low = x[: x.size - x.size % DECIMATE].reshape(-1, DECIMATE).mean(axis=1)
        pending = np.concatenate((self._tail, low))
        best = 0.0
        at = 0
        if self._state is _ZERO_STATE:  # a burst's first frame: its windows end where it ends
            at = pending.size % CHUNK
            if at >= CONTEXT:
                self._context = pending[at - CONTEXT:at]
        while pending.size - at >= CHUNK:
            chunk = np.concatenate((self._context, pending[at:at + CHUNK]))
            p, self._state = self._model.run(chunk, self._state)
            if p >= enough:  # the windows it skips are those the full frame would judge
                end = pending.size - (pending.size - at) % CHUNK
                self._context, self._tail = pending[end - CONTEXT:end], pending[end:]
                return p
            best = max(best, p)
            self._context = chunk[-CONTEXT:]
            at += CHUNK
        self._tail = pending[at:]
        return best
