"""Commands in the caller's own containers.

```python
from wharf_sdk import exec
out = exec.run(container_id, "ls -la /work")          # a shell line
out = exec.run(container_id, ["cat", "/etc/hostname"])  # argv, no shell
out.exit_code, out.text, out.stderr_text
```
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _wit


@dataclasses.dataclass
class ExecOutput:
    """The outcome of a command; a non-zero exit is a result, not an error."""

    exit_code: Optional[int]
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    duration_ms: int

    @property
    def text(self) -> str:
        """stdout as text (invalid UTF-8 replaced)."""
        return _wit.as_text(self.stdout)

    @property
    def stderr_text(self) -> str:
        """stderr as text (invalid UTF-8 replaced)."""
        return _wit.as_text(self.stderr)

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.exit_code == 0


def command_of(value: Union[str, Sequence[str]]) -> Any:
    """The contract's command: a shell line, or an argv list run without a shell."""
    m = _wit.module("exec")
    return m.Command_Shell(value) if isinstance(value, str) else m.Command_Argv(list(value))


def run(
    container: str,
    command: Union[str, Sequence[str]],
    *,
    env: Optional[Dict[str, str]] = None,
    workdir: Optional[str] = None,
    user: Optional[str] = None,
    stdin: Union[None, bytes, str] = None,
    timeout_ms: int = 30_000,
    max_output_bytes: int = 1 << 20,
) -> ExecOutput:
    """Runs `command` (a shell line, or an argv list run without a shell) and waits."""
    m = _wit.module("exec")
    request = m.ExecRequest(
        container=container,
        command=command_of(command),
        env=[(str(k), str(v)) for k, v in (env or {}).items()],
        workdir=workdir,
        user=user,
        stdin=None if stdin is None else _wit.as_bytes(stdin),
        timeout_ms=timeout_ms,
        max_output_bytes=max_output_bytes,
    )
    out = _wit.host_call(m.run, request)
    return ExecOutput(
        exit_code=out.exit_code,
        stdout=bytes(out.stdout),
        stderr=bytes(out.stderr),
        stdout_truncated=out.stdout_truncated,
        stderr_truncated=out.stderr_truncated,
        timed_out=out.timed_out,
        duration_ms=out.duration_ms,
    )


__all__: List[str] = ["ExecOutput", "run"]
