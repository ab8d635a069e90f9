"""Logs into the host's tracing, tagged with the backend and session:
`log.info("indexed %d documents", n)`. `log.handler()` is a `logging.Handler` that does
the same for the standard `logging` module."""

from __future__ import annotations

import logging
from typing import Any

from . import _wit

_LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str, *args: Any) -> None:
    """Writes one record at `level` (`trace`, `debug`, `info`, `warn`, `error`)."""
    if level not in _LEVELS:
        raise ValueError(f"unknown log level {level!r}")
    text = message % args if args else str(message)
    try:
        m = _wit.module("log")
    except RuntimeError:
        import sys

        print(f"[{level}] {text}", file=sys.stderr)
        return
    m.log(getattr(m.Level, level.upper()), text)


def trace(message: str, *args: Any) -> None:
    """A trace record."""
    log("trace", message, *args)


def debug(message: str, *args: Any) -> None:
    """A debug record."""
    log("debug", message, *args)


def info(message: str, *args: Any) -> None:
    """An info record."""
    log("info", message, *args)


def warn(message: str, *args: Any) -> None:
    """A warning."""
    log("warn", message, *args)


warning = warn


def error(message: str, *args: Any) -> None:
    """An error record."""
    log("error", message, *args)


class _HostHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            level = "error"
        elif record.levelno >= logging.WARNING:
            level = "warn"
        elif record.levelno >= logging.INFO:
            level = "info"
        else:
            level = "debug"
        try:
            log(level, self.format(record))
        except Exception:  # a log line never fails a call
            pass


def handler() -> logging.Handler:
    """A `logging.Handler` writing into the host's log."""
    return _HostHandler()
