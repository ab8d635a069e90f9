"""How far the call in progress has come (contract 0.3.0): `progress.report(1, 3, "step 1")`.
The host passes each report to a caller that asked to hear it (an MCP client's
`progressToken`, a streaming REST call) and drops it otherwise. `progress` must be finite,
at least 0 and larger than the call's last report; `total`, when known, finite and
positive (else a `ToolError` 4000)."""

from __future__ import annotations

from typing import Optional

from . import _wit


def report(progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Reports `progress` out of `total`, with a message for people."""
    total = None if total is None else float(total)
    _wit.host_call(_wit.module("progress").report, float(progress), total, message)
