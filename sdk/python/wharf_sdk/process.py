"""Background processes in the caller's own containers, through the sandbox agent
(contract 0.3.0): start one, read its output from any offset, write to its stdin, signal
it, list them. They run until they exit or the container goes, beside the calls.

```python
from wharf_sdk import process
p = process.start(container_id, "python3 -m http.server 8000")
out = process.output(container_id, p.pid, offset=0, wait_ms=2000)
out.text, out.offset, out.process.running
process.signal(container_id, p.pid, "term")
```

A container without the agent answers 4030.
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import _wit
from .exec import command_of

#: The signals a process may be sent.
SIGNALS = ("term", "kill", "int", "hup", "quit", "usr1", "usr2", "stop", "cont")


@dataclasses.dataclass
class ProcessInfo:
    """A background process (`exit_code` once it has exited: 128 + n for signal n)."""

    pid: int
    command: str
    running: bool
    exit_code: Optional[int]
    started_at_ms: int
    output_bytes: int
    dropped_bytes: int


@dataclasses.dataclass
class ProcessOutput:
    """A piece of a process's output: `offset` is its first byte's (past the asked one when
    older bytes were dropped, `dropped` of them)."""

    offset: int
    data: bytes
    dropped: int
    process: ProcessInfo

    @property
    def text(self) -> str:
        """The bytes as text (invalid UTF-8 replaced)."""
        return _wit.as_text(self.data)

    @property
    def finished(self) -> bool:
        """No more output will come: the process ended and this piece reaches its end."""
        return not self.process.running and self.offset + len(self.data) == self.process.output_bytes


def _info(raw: object) -> ProcessInfo:
    return ProcessInfo(
        pid=raw.pid,  # type: ignore[attr-defined]
        command=raw.command,  # type: ignore[attr-defined]
        running=raw.running,  # type: ignore[attr-defined]
        exit_code=raw.exit_code,  # type: ignore[attr-defined]
        started_at_ms=raw.started_at_ms,  # type: ignore[attr-defined]
        output_bytes=raw.output_bytes,  # type: ignore[attr-defined]
        dropped_bytes=raw.dropped_bytes,  # type: ignore[attr-defined]
    )


def start(
    container: str,
    command: Union[str, Sequence[str]],
    *,
    env: Union[None, Dict[str, str], Sequence[Tuple[str, str]]] = None,
    workdir: Optional[str] = None,
    user: Optional[str] = None,
    buffer_bytes: int = 0,
    terminal: Optional[Tuple[int, int]] = None,
) -> ProcessInfo:
    """Starts `command` (a shell line, or an argv list run without a shell). `buffer_bytes`
    of output are kept (0: 1 MiB); `terminal=(cols, rows)` runs it on a PTY."""
    m = _wit.module("process")
    pairs = env.items() if isinstance(env, dict) else (env or ())
    spec = m.ProcessSpec(
        container=container,
        command=command_of(command),
        env=[(str(k), str(v)) for k, v in pairs],
        workdir=workdir,
        user=user,
        buffer_bytes=buffer_bytes,
        terminal=None if terminal is None else m.TerminalSize(cols=terminal[0], rows=terminal[1]),
    )
    return _info(_wit.host_call(m.start, spec))


def output(
    container: str, pid: int, *, offset: int = 0, max_bytes: int = 256 * 1024, wait_ms: int = 0
) -> ProcessOutput:
    """Its output from `offset`; when there is none yet and it runs, waits up to `wait_ms`
    (at most 60 000) for some."""
    m = _wit.module("process")
    raw = _wit.host_call(m.output, container, pid, offset, max_bytes, wait_ms)
    return ProcessOutput(
        offset=raw.offset,
        data=bytes(raw.data),
        dropped=raw.dropped,
        process=_info(raw.process),
    )


def write_stdin(container: str, pid: int, data: Union[bytes, str], *, close: bool = False) -> None:
    """Writes to its stdin (at most 256 KiB; text is UTF-8), then closes it when `close`."""
    m = _wit.module("process")
    _wit.host_call(m.write_stdin, container, pid, _wit.as_bytes(data), close)


def signal(container: str, pid: int, name: str = "term") -> None:
    """Sends a signal (one of `SIGNALS`) to its process group."""
    if name not in SIGNALS:
        raise ValueError(f"unknown signal {name!r}: one of {', '.join(SIGNALS)}")
    m = _wit.module("process")
    _wit.host_call(m.send_signal, container, pid, getattr(m.Signal, name.upper()))


def list(container: str) -> builtins.list:  # noqa: A001 - the contract's name
    """The container's background processes (`ProcessInfo`), oldest first."""
    m = _wit.module("process")
    return [_info(raw) for raw in _wit.host_call(_wit.function(m, "list"), container)]


__all__: List[str] = [
    "SIGNALS",
    "ProcessInfo",
    "ProcessOutput",
    "list",
    "output",
    "signal",
    "start",
    "write_stdin",
]
