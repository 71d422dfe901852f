"""The gpt-live §14 checklist, one module per part of it."""

from liveplex.conformance.checklist import Check
from liveplex.conformance.checks import (
    capacity,
    clients,
    closing,
    compat,
    forks,
    handshake,
    refusals,
    start,
    stored,
    stream,
)

ALL: tuple[Check, ...] = tuple(sorted(
    (*handshake.CHECKS, *start.CHECKS, *capacity.CHECKS, *stream.CHECKS, *refusals.CHECKS,
     *closing.CHECKS, *clients.CHECKS, *compat.CHECKS, *stored.CHECKS, *forks.CHECKS),
    key=lambda check: check.number,
))
"""Every check, in checklist order."""

__all__ = ["ALL"]
