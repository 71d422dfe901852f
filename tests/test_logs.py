"""`configure_logging`: libraries' routine info lines (`logs.ROUTINE`) are left out unless asked for."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from liveplex import logs


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.add(f"{record.name} {record.levelname.lower()}")


@pytest.fixture
def restored() -> Iterator[None]:
    """`configure_logging` replaces the root's handlers (pytest's among them): put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in logs.ROUTINE:
        logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.mark.parametrize(("level", "written"), [
    ("info", {"aioice.ice warning", "kopf.objects warning", "liveplex.operator.handlers info"}),
    ("debug", {"aioice.ice info", "aioice.ice warning", "kopf.objects info", "kopf.objects warning",
               "liveplex.operator.handlers info"}),
    ("error", set()),
])
def test_routine_info_lines_are_written_only_at_debug(restored: None, level: str, written: set[str]) -> None:
    logs.configure_logging(level)
    capture = Lines()
    logging.getLogger().addHandler(capture)
    for name in ("aioice.ice", "kopf.objects", "liveplex.operator.handlers"):
        logging.getLogger(name).info("x")
        if name != "liveplex.operator.handlers":
            logging.getLogger(name).warning("x")
    assert capture.lines == written
