"""What a park holds in host memory (issue 43, docs/pause.md): torch's pinned host allocator holds
each pinned tensor in a power-of-two block, and the host budget counts those blocks."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import torch

from liveplex.bench import engine_counts
from liveplex.engine_pod import program


def test_a_pinned_block_is_the_request_rounded_up_to_a_power_of_two():
    assert [program.pinned_block_bytes(n) for n in (0, 1, 2, 3, 4096, 4097)] == [0, 1, 2, 4, 4096, 8192]
    assert program.pinned_block_bytes(1_572_864_000) == 2 << 30  # the 7B's bf16 ring row
    assert program.pinned_block_bytes(786_432_000) == 1 << 30  # and its fp8 one
    assert program.held_bytes([3, 4097], pinned=True) == 4 + 8192
    assert program.held_bytes([3, 4097], pinned=False) == 3 + 4097


def test_parked_rows_count_their_pinned_blocks_and_plain_ones_their_bytes():
    """A park on the CPU holds plain tensors, exactly its bytes; the same rows pinned (a park from
    CUDA) hold each tensor's block, which is what `Parked.nbytes` gives the host budget."""
    small = engine_counts.build("tiny", "cpu", torch.float32)
    pools = program.Pools(small.lm, small.codec, 2)
    rows = pools.park(1)
    assert not rows.pinned and rows.held_bytes == rows.nbytes == sum(pools.park_sizes())
    pinned = dataclasses.replace(rows, pinned=True)
    assert pinned.held_bytes == sum(program.pinned_block_bytes(n) for n in pools.park_sizes()) > rows.nbytes


def test_torch_still_rounds_pinned_blocks_up_to_a_power_of_two():
    """`pinned_block_bytes` is a reading of the installed torch's `CachingHostAllocator::allocate`;
    a torch that rounds otherwise must change it (and docs/pause.md's figures)."""
    header = pathlib.Path(torch.__file__).parent / "include/ATen/core/CachingHostAllocator.h"
    if not header.exists():
        pytest.skip("this torch ships no C++ headers")
    source = header.read_text()
    assert "return c10::llvm::PowerOf2Ceil(size);" in source
    assert "allocate_host_memory(roundSize, &ptr);" in source
