"""Where the fused kernels run (`kernels.fusion`): CUDA and the meta device, with Triton; the eager
ops everywhere else, and everywhere without Triton (the CPU wheel), where the engine still imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from liveplex.bench import counts
from liveplex.personaplex import blocks, kernels


def test_the_cpu_always_runs_the_eager_ops_and_cuda_and_meta_the_fused_ones_with_triton():
    assert not kernels.fused(torch.device("cpu"))
    assert kernels.fused(torch.device("meta")) is kernels.fused(torch.device("cuda")) is kernels.TRITON


@pytest.mark.skipif(not kernels.TRITON, reason="the fused kernels need Triton (the dev extra installs it)")
def test_with_triton_the_meta_device_counts_an_ffns_silu_and_gate_as_the_one_kernel_cuda_runs():
    with torch.device("meta"):
        ffn = blocks.Gating(8, 16)
        with counts.count() as c:
            out = ffn.hidden(torch.empty(2, 8))
    assert out.shape == (2, 16) and dict(c.ops) == {"mm": 1, "liveplex::silu_and_mul": 1}


def test_without_triton_the_engine_imports_and_counts_the_eager_ops_on_meta():
    script = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None  # as if not installed: importing it raises ImportError
        import torch
        from liveplex.bench import counts
        from liveplex.engine_pod import program  # the served program imports without Triton
        from liveplex.personaplex import blocks, kernels
        assert not kernels.TRITON and not kernels.fused(torch.device("meta"))
        with torch.device("meta"):
            ffn = blocks.Gating(8, 16)
            with counts.count() as c:
                ffn.hidden(torch.empty(2, 8))
        print(sorted(c.ops))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['mm', 'mul', 'silu']"
