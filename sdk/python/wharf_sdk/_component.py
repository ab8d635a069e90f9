"""The export glue: turns a `Backend` / `Provider` subclass into the classes componentize-py
exports. Imported only by the entry module `wharf-py build` generates, inside the
component; every exception leaves here as the contract's `error` record, never a trap."""

from __future__ import annotations

import json
from typing import Any, Optional

from wit_world import exports  # type: ignore[import-not-found]
from componentize_py_types import Err  # type: ignore[import-not-found]

from . import _wit
from .backend import Backend, Discovery, Runtime, SessionRecord, find_class
from .errors import ToolError
from .provider import (
    CommandRequest,
    CommandResult,
    DirEntry,
    FileChunk,
    Provider,
    ProviderRuntime,
    spec_from,
)



def _import_every_host_module() -> None:
    """componentize-py keeps only the modules imported while it builds the component, and
    the SDK imports host modules when first used: import every generated one now, so
    `http` (and any other import) works without the author importing it."""
    import importlib
    import pkgutil

    from wit_world import imports  # type: ignore[import-not-found]

    for found in pkgutil.iter_modules(imports.__path__):
        importlib.import_module(f"{imports.__name__}.{found.name}")


_import_every_host_module()
_types = _wit.module("wharf_plugin_types")


def _error(err: ToolError) -> Any:
    data: Optional[str] = None
    if err.data is not None:
        try:
            data = json.dumps(err.data)
        except (TypeError, ValueError):
            data = json.dumps(repr(err.data))
    return Err(_types.Error(err.code, err.message, err.retryable, data))


def _guard(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ToolError as err:
        raise _error(err) from None


def _record(raw: Any) -> SessionRecord:
    return SessionRecord(raw.id, raw.key, raw.data, raw.created_at_ms, raw.expires_at_ms)


def _capabilities(c: Any) -> Any:
    return _types.Capabilities(list(c.images), list(c.http_hosts), list(c.networks), list(c.host_mounts))


_NEED = {"none": "NONE", "required": "REQUIRED", "optional": "OPTIONAL"}


def backend_export(module: Any) -> type:
    """The `Backend` export class for the one `wharf_sdk.Backend` subclass in `module`."""
    runtime = Runtime(find_class(module, Backend))
    info = runtime.describe()
    specs = [
        _types.ToolSpec(
            name=t.name,
            description=t.description,
            input_schema=json.dumps(t.input_schema),
            output_schema=json.dumps(t.output_schema) if t.output_schema is not None else None,
            session=getattr(_types.SessionNeed, _NEED[t.session]),
            annotations=_types.ToolAnnotations(t.read_only, t.destructive, t.idempotent, t.open_world),
        )
        for t in info["tools"]
    ]
    described = _types.BackendInfo(
        name=info["name"],
        version=info["version"],
        description=info["description"],
        tools=specs,
        config_schema=info["config_schema"],
        session_config_schema=info["session_config_schema"],
        requires=_capabilities(info["requires"]),
    )

    class Export(exports.Backend):  # type: ignore[misc, valid-type]
        def describe(self) -> Any:
            return described

        def warmup(self, config: str) -> None:
            _guard(runtime.warmup, config)

        def shutdown(self) -> None:
            runtime.shutdown()

        def initialize(self, session_id: str, key: str, config: str) -> str:
            return _guard(runtime.initialize, session_id, key, config)

        def cleanup(self, session: Any) -> None:
            _guard(runtime.cleanup, _record(session))

        def discover(self, session: Any) -> Any:
            verdict: Discovery = _guard(runtime.discover, _record(session))
            if verdict.kind == "gone":
                return _types.Discovery_Gone()
            if verdict.kind == "alive-with":
                return _types.Discovery_AliveWith(verdict.data)
            return _types.Discovery_Alive()

        def call(self, tool: str, args: str, session: Any) -> Any:
            reply = _guard(runtime.call, tool, args, _record(session) if session is not None else None)
            return _types.ToolOutput(
                content=reply.content,
                attachments=[_types.Attachment(a.name, a.mime_type, bytes(a.data)) for a in reply.attachments],
                session_data=reply.session_data,
            )

    Export.__name__ = "Backend"
    return Export


def provider_export(module: Any) -> type:
    """The `Provider` export class for the one `wharf_sdk.Provider` subclass in `module`."""
    from wit_world.exports import provider as wit  # type: ignore[import-not-found]

    runtime = ProviderRuntime(find_class(module, Provider))
    info = runtime.describe()
    flags = wit.ProviderFeatures(0)
    for feature in info["features"]:
        flags |= getattr(wit.ProviderFeatures, feature.upper())
    described = wit.ProviderInfo(
        name=info["name"],
        version=info["version"],
        description=info["description"],
        features=flags,
        requires=_capabilities(info["requires"]),
    )

    def result(out: Any) -> Any:
        if not isinstance(out, CommandResult):
            raise ToolError.execution("run_command must return a wharf_sdk.CommandResult")
        return wit.CommandResult(
            out.exit_code,
            bytes(out.stdout),
            bytes(out.stderr),
            out.stdout_truncated,
            out.stderr_truncated,
            out.timed_out,
            out.sandbox_terminated,
        )

    class Export(exports.Provider):  # type: ignore[misc, valid-type]
        def describe(self) -> Any:
            return described

        def warmup(self, config: str) -> None:
            _guard(runtime.run, "warmup", config)

        def shutdown(self) -> None:
            try:
                runtime.run("shutdown")
            except ToolError:
                pass

        def create(self, spec: Any) -> str:
            return str(_guard(runtime.run, "create", spec_from(spec)))

        def run_command(self, sandbox: str, request: Any) -> Any:
            req = CommandRequest(request.command, request.stdin, request.timeout_ms, request.max_output_bytes)
            return _guard(lambda: result(runtime.run("run_command", sandbox, req)))

        def destroy(self, sandbox: str) -> None:
            _guard(runtime.run, "destroy", sandbox)

        def is_alive(self, sandbox: str) -> bool:
            return bool(_guard(runtime.run, "is_alive", sandbox))

        def read_file(self, sandbox: str, path: str, offset: int, max_bytes: int) -> Any:
            chunk: FileChunk = _guard(runtime.run, "read_file", sandbox, path, offset, max_bytes)
            return wit.FileChunk(bytes(chunk.data), chunk.total_size)

        def write_file(self, sandbox: str, path: str, content: bytes) -> None:
            _guard(runtime.run, "write_file", sandbox, path, bytes(content))

        def list_dir(self, sandbox: str, path: str) -> Any:
            entries = _guard(runtime.run, "list_dir", sandbox, path)
            return [
                wit.DirEntry(e.name, getattr(wit.EntryKind, str(e.kind).upper(), wit.EntryKind.OTHER), e.size)
                for e in entries
                if isinstance(e, DirEntry)
            ]

    Export.__name__ = "Provider"
    return Export


def processes_export() -> type:
    """The `Processes` export of a provider (contract 0.3.0): a Python provider runs no
    background processes, so `available` answers false (the host then offers none of the
    process tools) and every other call is refused with 4030."""

    def refused(*_: Any) -> Any:
        raise _error(ToolError(4030, "this provider does not run background processes")) from None

    class Export(exports.Processes):  # type: ignore[misc, valid-type]
        def available(self) -> bool:
            return False

        start = refused
        output = refused
        write_stdin = refused
        send_signal = refused
        list = refused

    Export.__name__ = "Processes"
    return Export


def suspension_export() -> type:
    """The `Suspension` export of a provider (contract 0.3.0): a Python provider cannot
    pause its sandboxes, so `available` answers false (the host never asks it, and a
    request to pause one of its sessions is refused with 4030)."""

    def refused(*_: Any) -> Any:
        raise _error(ToolError(4030, "this provider cannot pause its sandboxes")) from None

    class Export(exports.Suspension):  # type: ignore[misc, valid-type]
        def available(self) -> bool:
            return False

        pause = refused
        resume = refused
        snapshot = refused

    Export.__name__ = "Suspension"
    return Export


def tool_listing_export() -> type:
    """The `ToolListing` export of a resource backend (contract 0.3.0): a Python backend's
    tools are the fixed list `describe` gives, so `list_tools` answers `None` and the host
    never asks again."""

    class Export(exports.ToolListing):  # type: ignore[misc, valid-type]
        def list_tools(self) -> Any:
            return None

    Export.__name__ = "ToolListing"
    return Export
