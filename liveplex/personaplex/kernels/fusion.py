"""Where the fused kernels run: one decision, by device, for every call site (issue 14).

A fused op (`liveplex::`, this package) runs where its Triton kernel does: on CUDA, and on the
meta device, where `liveplex.bench.counts` counts a tick as CUDA launches it (the op's fake
implementation gives the shapes). Everywhere else, and wherever Triton is not installed (the CPU
wheel), the call sites run the eager aten composition instead: the CPU path, the golden tests'
path, and the reference each kernel is tested against.
"""

from __future__ import annotations

import importlib

import torch


def _imports(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


TRITON = _imports("triton")
"""Triton imports: torch's CUDA wheels bring the version they were built with; the CPU wheel has
none (the `dev` extra pins the range the interpreter tests run on)."""

_FUSED_DEVICES = frozenset({"cuda", "meta"})


def fused(device: torch.device) -> bool:
    """Whether work on `device` runs the fused kernels rather than the eager composition."""
    return TRITON and device.type in _FUSED_DEVICES
