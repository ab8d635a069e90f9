"""Secrets the operator granted this backend by name (`[backends.NAME.grants.secrets]`,
contract 0.3.0), so they need not travel inside the backend's config:
`secrets.get("api_token")`. The host reads each value where the operator keeps it when it
is asked; call `get` when the value is needed rather than keeping it, and a rotated secret
is picked up."""

from __future__ import annotations

from typing import List

from . import _wit


def get(name: str) -> str:
    """The value granted under `name`; a `ToolError` 4030 when this backend was not granted
    it, 4000 for a malformed name, 5012 when the host cannot read it."""
    return _wit.host_call(_wit.module("secrets").get, name)


def names() -> List[str]:
    """The names of the secrets granted to this backend, sorted (never their values)."""
    return list(_wit.module("secrets").names())
