"""Start-up of a PersonaPlex pod: load the checkpoint, size the pools, describe what is served.

Spec personaplex §5.2. The model is loaded before the front end starts, because `LiveInfo` (the
voices, the role-prompt limit, the session cap) depends on it; the engine itself (voice prefixes,
pools, graphs, warm-up) is built on the engine thread by the factory this returns, and the pod
turns ready only once that is done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from liveplex.engine_pod import engine, model
from liveplex.engine_pod.settings import EngineSettings
from liveplex.live import contract
from liveplex.live.pulse import Pulse

logger = logging.getLogger(__name__)

EngineFactory = Callable[[Pulse | None], engine.PersonaPlexEngine]
"""Builds the engine on the engine thread, writing its prefill and KV figures to the pulse."""


def prepare(settings: EngineSettings) -> tuple[contract.LiveInfo, EngineFactory]:
    """Load and size; raises `model.StartupError` or `memory.CapacityError` (both ValueError)."""
    started = time.perf_counter()
    if settings.device == "cpu":
        torch.set_num_threads(settings.cpu_threads)
    loaded = model.load(settings.model_dir, device=settings.device, dtype=settings.dtype,
                        context_frames=settings.context_frames, max_voice_frames=settings.max_voice_frames,
                        custom_voices_dir=settings.custom_voices_dir)
    info = engine.live_info(loaded, settings, engine.session_cap(loaded, settings))
    logger.info("checkpoint loaded", extra={
        "model_dir": str(settings.model_dir), "architecture": loaded.name,
        "load_s": round(time.perf_counter() - started, 2), "max_sessions": info.max_sessions})

    def build(pulse: Pulse | None) -> engine.PersonaPlexEngine:
        return engine.PersonaPlexEngine(loaded, settings, info, pulse)

    return info, build
