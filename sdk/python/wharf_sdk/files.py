"""Files in the caller's own containers, through the sandbox agent (contract 0.3.0): no
shell in the container, the sandbox's user's permissions.

```python
from wharf_sdk import files
files.write(container_id, "/work/notes.txt", "hello\n")
files.write(container_id, "/work/notes.txt", "more\n", append=True)
data = files.read(container_id, "/work/notes.txt")     # FileData: .data, .size, .text
info = files.stat(container_id, "/work/notes.txt")     # FileInfo: .kind, .size, ...
for entry in files.list(container_id, "/work"):
    print(entry.name, entry.kind)
```

A container without the agent answers 4030; use `exec.run` there.
"""

from __future__ import annotations

import builtins
import dataclasses
from typing import List, Optional, Union

from . import _wit


@dataclasses.dataclass
class FileInfo:
    """One path: `kind` is "file", "directory", "symlink" or "other" (a final symlink is
    not followed)."""

    name: str
    kind: str
    size: int
    mode: int
    modified_ms: int
    link_target: Optional[str]


@dataclasses.dataclass
class FileData:
    """A piece of a regular file, and the whole file's size when it was read."""

    data: bytes
    size: int

    @property
    def text(self) -> str:
        """The bytes as text (invalid UTF-8 replaced)."""
        return _wit.as_text(self.data)


def _info(raw: object) -> FileInfo:
    return FileInfo(
        name=raw.name,  # type: ignore[attr-defined]
        kind=raw.kind.name.lower(),  # type: ignore[attr-defined]
        size=raw.size,  # type: ignore[attr-defined]
        mode=raw.mode,  # type: ignore[attr-defined]
        modified_ms=raw.modified_ms,  # type: ignore[attr-defined]
        link_target=raw.link_target,  # type: ignore[attr-defined]
    )


def stat(container: str, path: str) -> FileInfo:
    """What `path` is."""
    m = _wit.module("files")
    return _info(_wit.host_call(m.stat, container, path))


def read(container: str, path: str, *, offset: int = 0, max_bytes: int = 1 << 20) -> FileData:
    """Up to `max_bytes` of a regular file from `offset` (the host bounds it by its guest
    buffer)."""
    if offset < 0 or max_bytes < 0:
        raise ValueError("offset and max_bytes must not be negative")
    m = _wit.module("files")
    raw = _wit.host_call(m.read, container, path, offset, max_bytes)
    return FileData(data=bytes(raw.data), size=raw.size)


def write(container: str, path: str, content: Union[bytes, str], *, append: bool = False) -> None:
    """Writes `content` (text is UTF-8) to a file, its parent directories made when
    missing, replacing it or, with `append`, adding to it."""
    m = _wit.module("files")
    _wit.host_call(m.write, container, path, _wit.as_bytes(content), append)


def list(container: str, path: str) -> builtins.list:  # noqa: A001 - the contract's name
    """A directory's entries (`FileInfo`), sorted by name, at most 10,000."""
    m = _wit.module("files")
    return [_info(raw) for raw in _wit.host_call(_wit.function(m, "list"), container, path)]


__all__: List[str] = ["FileData", "FileInfo", "list", "read", "stat", "write"]
