"""The bindings componentize-py generates for the contract, imported in one place.

These modules exist only inside a component built by `wharf-py build`; natively, using a
host import raises `RuntimeError` (tests replace the functions they need).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, Union

from .errors import ToolError

T = TypeVar("T")


def bindings() -> Any:
    """The generated `wit_world.imports` package."""
    try:
        from wit_world import imports  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - only natively
        raise RuntimeError(
            "host imports are only available inside a component built with `wharf-py build`"
        ) from exc
    return imports


def module(name: str) -> Any:
    """One generated import module: `kv`, `log`, `container`, `exec`, `secrets`,
    `wharf_plugin_types`, `wasi_http_types`, `outgoing_handler`, `streams`, `poll`."""
    import importlib

    bindings()
    return importlib.import_module(f"wit_world.imports.{name}")


def function(module: Any, name: str) -> Callable[..., Any]:
    """A generated function by its contract name (componentize-py appends `_` to a name
    that is a Python builtin or keyword, such as `list`)."""
    return getattr(module, f"{name}_", None) or getattr(module, name)


def as_bytes(content: Union[bytes, str]) -> bytes:
    """What a caller gave as bytes: text is UTF-8."""
    return content.encode("utf-8") if isinstance(content, str) else bytes(content)


def as_text(data: bytes) -> str:
    """Bytes as text, invalid UTF-8 replaced."""
    return data.decode("utf-8", errors="replace")


def err_class() -> Any:
    from componentize_py_types import Err  # type: ignore[import-not-found]

    return Err


def host_call(fn: Callable[..., T], *args: Any) -> T:
    """Calls a host import; its `error` record becomes a `ToolError` with the host's code,
    message, retryability and data."""
    Err = err_class()
    try:
        return fn(*args)
    except Err as failure:
        raise as_tool_error(failure.value) from None


def as_tool_error(value: Any) -> ToolError:
    import json

    data = getattr(value, "data", None)
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            pass
    return ToolError(
        getattr(value, "code", 5000),
        getattr(value, "message", str(value)),
        retryable=getattr(value, "retryable", False),
        data=data,
    )
