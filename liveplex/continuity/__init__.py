"""Continuity: a running session's state as a versioned blob that leaves one engine and enters
another (issue 24, docs/continuity.md). Pure: numpy and the live contract, no engine, no I/O, so
pods, gateways and tests can all read a blob's header."""

from liveplex.continuity.blob import FORMAT_VERSION, Handover, Header, check, decode, encode, peek
from liveplex.continuity.errors import Code, HandoverError

__all__ = ["FORMAT_VERSION", "Handover", "Header", "check", "decode", "encode", "peek", "Code",
           "HandoverError"]
