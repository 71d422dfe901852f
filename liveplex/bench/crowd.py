"""A crowd: many bench sessions on one event loop, started `stagger` apart."""

from __future__ import annotations

import asyncio

from liveplex.bench import audio, caller


def prepare(settings: caller.CallSettings, source: audio.Source, indices: list[int]) -> list[bytes]:
    """Each session's caller audio, made before the level's epoch so synthesis never delays a
    start."""
    return [audio.wire(source, settings.audio_format, settings.rate, settings.seconds, i, settings.talk_profile)
            for i in indices]


async def crowd(
    settings: caller.CallSettings,
    sounds: list[bytes],
    indices: list[int],
    epoch_ns: int,
    stagger_ns: int,
    tally: caller.Tally,
) -> list[caller.CallResult]:
    """Run sessions `indices` of a level with audio `sounds`; session `i` connects at
    `epoch_ns + i · stagger_ns` (`perf_counter_ns` clock, shared by every process on Linux).

    Results come back in the order of `indices`.
    """
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(caller.call(settings, sound, epoch_ns + i * stagger_ns, tally, seed=i))
            for i, sound in zip(indices, sounds)
        ]
    return [task.result() for task in tasks]
