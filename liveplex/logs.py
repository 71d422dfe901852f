"""JSON log lines on stderr, one object per record, for every liveplex process (pods, gateways,
the operator): a log pipeline parses them without a pattern per component."""

from __future__ import annotations

import argparse
import json
import logging


class JsonFormatter(logging.Formatter):
    """One JSON object per line: a fixed message plus the record's `extra` fields."""

    _PLAIN = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(record.created, 3), "level": record.levelname.lower(),
               "logger": record.name, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in self._PLAIN})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                        help="least severe log line written (default: %(default)s)")


ROUTINE = ("aioice", "kopf")
"""Libraries whose info lines are routine: only their warnings and errors are written unless
`--log-level debug`. aioice writes eight a WebRTC call (each ICE check's state), kopf one after each
handler and status timer that succeeded (every LiveEngine, every interval); the operator's own lines
go through its own loggers."""


def configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    quiet = logging.NOTSET if level == "debug" else max(logging.WARNING, logging.getLogger().level)
    for name in ROUTINE:
        logging.getLogger(name).setLevel(quiet)
