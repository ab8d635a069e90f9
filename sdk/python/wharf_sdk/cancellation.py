"""Whether the call in progress is still wanted (contract 0.3.0): `cancellation.cancelled()`.
A caller that gives up leaves the call about a second to end; host imports that wait end
at once with a `ToolError` 4990 by themselves."""

from __future__ import annotations

from . import _wit


def cancelled() -> bool:
    """Whether the call's caller gave up on it."""
    return bool(_wit.module("cancellation").cancelled())
