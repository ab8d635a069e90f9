"""Durable key-value state kept by the host, backend-wide or per session.

```python
from wharf_sdk import kv
kv.backend.set_json("config", {"a": 1})
kv.session.get_str("draft")            # only inside a session call (else 4007)
kv.get("key", scope="session")         # the same, as functions
```

Quotas (host side): 64 KiB per value, 1,000 keys and 4 MiB per scope.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Union

from . import _wit

Bytes = Union[bytes, bytearray, str]


def _scope(name: str) -> Any:
    m = _wit.module("kv")
    if name not in ("backend", "session"):
        raise ValueError(f"kv scope must be 'backend' or 'session', not {name!r}")
    return getattr(m.Scope, name.upper())


def _bytes(value: Bytes) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def get(key: str, scope: str = "backend") -> Optional[bytes]:
    """The value under `key`, or `None`."""
    m = _wit.module("kv")
    return _wit.host_call(m.get, _scope(scope), key)


def set(key: str, value: Bytes, scope: str = "backend") -> None:  # noqa: A001 - the contract's name
    """Stores `value` (bytes, or text as UTF-8) under `key`."""
    m = _wit.module("kv")
    _wit.host_call(m.set, _scope(scope), key, _bytes(value))


def delete(key: str, scope: str = "backend") -> None:
    """Removes `key`; deleting an absent key is not an error."""
    m = _wit.module("kv")
    _wit.host_call(m.delete, _scope(scope), key)


def increment(key: str, delta: int = 1, scope: str = "backend") -> int:
    """Adds `delta` to the integer under `key` (absent counts as 0) in one step on the
    host, and answers the new value: a counter shared by instances never loses an update,
    where a read-modify-write would."""
    m = _wit.module("kv")
    return int(_wit.host_call(m.increment, _scope(scope), key, int(delta)))


def compare_and_swap(
    key: str,
    expected: Optional[Bytes],
    new: Optional[Bytes],
    scope: str = "backend",
) -> bool:
    """Sets `key` to `new` (`None` deletes it) only if it still holds `expected` (`None`:
    only if absent); answers whether it did. Text is compared and stored as UTF-8."""
    m = _wit.module("kv")
    return bool(
        _wit.host_call(
            m.compare_and_swap,
            _scope(scope),
            key,
            None if expected is None else _bytes(expected),
            None if new is None else _bytes(new),
        )
    )


def list_keys(prefix: str = "", scope: str = "backend") -> List[str]:
    """The keys starting with `prefix`."""
    m = _wit.module("kv")
    return list(_wit.host_call(m.list_keys, _scope(scope), prefix))


class Scope:
    """One scope's operations: `kv.backend` and `kv.session`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def get(self, key: str) -> Optional[bytes]:
        """The value under `key`, or `None`."""
        return get(key, self.name)

    def get_str(self, key: str) -> Optional[str]:
        """The value as UTF-8 text, or `None`."""
        value = get(key, self.name)
        return None if value is None else value.decode("utf-8")

    def get_json(self, key: str, default: Any = None) -> Any:
        """The value parsed as JSON, or `default` when absent."""
        value = get(key, self.name)
        return default if value is None else json.loads(value)

    def set(self, key: str, value: Bytes) -> None:
        """Stores bytes, or text as UTF-8."""
        set(key, value, self.name)

    def set_json(self, key: str, value: Any) -> None:
        """Stores `value` as JSON."""
        set(key, json.dumps(value, separators=(",", ":")), self.name)

    def delete(self, key: str) -> None:
        """Removes `key` (idempotent)."""
        delete(key, self.name)

    def list_keys(self, prefix: str = "") -> List[str]:
        """The keys starting with `prefix`."""
        return list_keys(prefix, self.name)

    def increment(self, key: str, delta: int = 1) -> int:
        """Adds `delta` atomically; answers the new value."""
        return increment(key, delta, self.name)

    def compare_and_swap(self, key: str, expected: Optional[Bytes], new: Optional[Bytes]) -> bool:
        """Sets `key` to `new` only if it holds `expected`; answers whether it did."""
        return compare_and_swap(key, expected, new, self.name)


#: Backend-wide values, shared by every instance and session.
backend = Scope("backend")
#: Values of the current call's session.
session = Scope("session")
