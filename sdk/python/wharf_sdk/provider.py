"""Sandbox providers (the `sandbox-provider` world): `create`, `run_command`, `destroy`,
`is_alive`, plus the native file and tag operations declared in `features`. The host
builds the standard sandbox toolset (`run_command`, `read_file`, `write_file`, …) and
sessions on top of them.

```python
class Boxes(Provider):
    name = "boxes"
    features = {"stdin"}
    def create(self, spec: SandboxSpec) -> str: ...
    def run_command(self, sandbox: str, request: CommandRequest) -> CommandResult: ...
    def destroy(self, sandbox: str) -> None: ...
    def is_alive(self, sandbox: str) -> bool: ...
```
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional, Set, Tuple

from .backend import Capabilities, report
from .errors import ToolError

#: The optional exports a provider may declare in `features`.
FEATURES = ("read_file", "write_file", "list_dir", "stdin", "poolable")


@dataclasses.dataclass
class NetworkPolicy:
    """Egress the sandbox must enforce; refuse (4030) what you cannot enforce."""

    block_network: bool = False
    allow_egress_to: List[str] = dataclasses.field(default_factory=list)
    allow_egress_to_cidrs: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SandboxSpec:
    """What the caller asks for; never provision less."""

    image: Optional[str] = None
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    network: NetworkPolicy = dataclasses.field(default_factory=NetworkPolicy)
    cpu_millis: Optional[int] = None
    memory_bytes: Optional[int] = None
    lifetime_seconds: Optional[int] = None
    owner: Optional[str] = None
    workdir: Optional[str] = None


@dataclasses.dataclass
class CommandRequest:
    """One command to run in a sandbox."""

    command: str
    stdin: Optional[bytes]
    timeout_ms: int
    max_output_bytes: int


@dataclasses.dataclass
class CommandResult:
    """The outcome of a command; a non-zero exit is a result, not an error."""

    exit_code: Optional[int]
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    sandbox_terminated: bool = False


@dataclasses.dataclass
class FileChunk:
    """A slice of a file: the bytes read and the whole file's size."""

    data: bytes
    total_size: int


@dataclasses.dataclass
class DirEntry:
    """One directory entry; `kind` is `file`, `directory`, `symlink` or `other`."""

    name: str
    kind: str
    size: int = 0


class Provider:
    """Subclass it, set `name`, `version`, `description`, `features` (a subset of
    `FEATURES`) and `requires`, and implement the four required operations."""

    name: str = ""
    version: str = "0.1.0"
    description: str = ""
    features: Set[str] = set()
    requires: Capabilities = Capabilities()

    def warmup(self, config: Any) -> None:
        """Once per instance; `config` is the operator's JSON (`None` when none)."""

    def shutdown(self) -> None:
        """Once per instance before it is dropped."""

    def create(self, spec: SandboxSpec) -> str:
        """Provisions a sandbox and returns its id."""
        raise ToolError.execution(f"{type(self).__name__} does not implement create")

    def run_command(self, sandbox: str, request: CommandRequest) -> CommandResult:
        """Runs one command in the sandbox."""
        raise ToolError.execution(f"{type(self).__name__} does not implement run_command")

    def destroy(self, sandbox: str) -> None:
        """Removes the sandbox; idempotent."""
        raise ToolError.execution(f"{type(self).__name__} does not implement destroy")

    def is_alive(self, sandbox: str) -> bool:
        """Whether the sandbox exists and answers (`False`, not an error, when gone)."""
        raise ToolError.execution(f"{type(self).__name__} does not implement is_alive")

    def read_file(self, sandbox: str, path: str, offset: int, max_bytes: int) -> FileChunk:
        """With the `read_file` feature."""
        raise ToolError.execution("read_file is not implemented")

    def write_file(self, sandbox: str, path: str, content: bytes) -> None:
        """With the `write_file` feature."""
        raise ToolError.execution("write_file is not implemented")

    def list_dir(self, sandbox: str, path: str) -> List[DirEntry]:
        """With the `list_dir` feature."""
        raise ToolError.execution("list_dir is not implemented")



class ProviderRuntime:
    """Drives one `Provider` subclass; every exception becomes a coded error."""

    def __init__(self, cls: type) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Provider)):
            raise TypeError(f"{cls!r} is not a wharf_sdk.Provider subclass")
        unknown = set(cls.features) - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown provider features {sorted(unknown)}; use {FEATURES}")
        self.cls = cls
        self._instance: Optional[Provider] = None

    @property
    def instance(self) -> Provider:
        if self._instance is None:
            self._instance = self.cls()
        return self._instance

    def describe(self) -> Dict[str, Any]:
        cls = self.cls
        return {
            "name": cls.name or cls.__name__.lower(),
            "version": cls.version,
            "description": cls.description or (cls.__doc__ or "").strip().split("\n\n")[0],
            "features": set(cls.features),
            "requires": cls.requires,
        }

    def run(self, op: str, *args: Any) -> Any:
        """Runs hook `op`, turning any exception into a `ToolError`."""
        try:
            if op == "warmup":
                text = args[0]
                return self.instance.warmup(json.loads(text) if text and text.strip() else None)
            return getattr(self.instance, op)(*args)
        except BaseException as exc:
            raise report(exc, op) from None


def spec_from(raw: Any) -> SandboxSpec:
    """The SDK's `SandboxSpec` from the generated record."""
    net = raw.network
    return SandboxSpec(
        image=raw.image,
        env=dict(raw.env),
        network=NetworkPolicy(net.block_network, list(net.allow_egress_to), list(net.allow_egress_to_cidrs)),
        cpu_millis=raw.cpu_millis,
        memory_bytes=raw.memory_bytes,
        lifetime_seconds=raw.lifetime_seconds,
        owner=raw.owner,
        workdir=raw.workdir,
    )
