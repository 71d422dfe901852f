"""Fixtures every test directory may use."""

import os

# The fused kernels (`liveplex.personaplex.kernels`) run through Triton's interpreter on CPU tensors
# here; `triton.jit` reads this when it decorates, so before anything imports them.
os.environ.setdefault("TRITON_INTERPRET", "1")

from tests.support.redis import redis_server, redis_url

__all__ = ["redis_server", "redis_url"]
