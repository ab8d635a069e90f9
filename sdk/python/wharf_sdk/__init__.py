"""Write Wharf backends in Python, shipped as one sandboxed `.wasm`.

```python
from wharf_sdk import Backend, Session, ToolError, tool

class Greeter(Backend):
    name = "greeter"
    description = "Says hello."

    @tool("hello", read_only=True)
    def hello(self, name: str, times: int = 1) -> dict:
        '''Greets someone.

        Args:
            name: Who to greet.
            times: How often.
        '''
        if times < 1:
            raise ToolError.invalid_input("times must be at least 1")
        return {"text": " ".join([f"hello {name}"] * times)}
```

Build it with `wharf-py build app.py -o greeter.wasm` (or `python -m wharf_sdk build …`).
"""

from . import cancellation, container, exec, files, http, kv, log, process, progress, secrets
from .backend import Backend, Call, Capabilities, Discovery, Session
from .contract import BACKEND_WORLD, PROVIDER_WORLD, VERSION as CONTRACT_VERSION
from .errors import ToolError
from .provider import (
    CommandRequest,
    CommandResult,
    DirEntry,
    FileChunk,
    NetworkPolicy,
    Provider,
    SandboxSpec,
)
from .tools import Attachment, Output, tool

__version__ = "0.1.0"

__all__ = [
    "Attachment",
    "Backend",
    "BACKEND_WORLD",
    "Call",
    "Capabilities",
    "CommandRequest",
    "CommandResult",
    "CONTRACT_VERSION",
    "DirEntry",
    "Discovery",
    "FileChunk",
    "NetworkPolicy",
    "Output",
    "Provider",
    "PROVIDER_WORLD",
    "SandboxSpec",
    "Session",
    "ToolError",
    "cancellation",
    "container",
    "exec",
    "http",
    "kv",
    "log",
    "progress",
    "secrets",
    "tool",
]
