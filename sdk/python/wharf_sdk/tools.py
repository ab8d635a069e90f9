"""`@tool`: a method whose signature is the tool's JSON Schema.

```python
class Notes(Backend):
    @tool("add", session="required")
    def add(self, text: str, tags: list[str] = [], *, session: Session) -> dict:
        '''Adds a note to this session.

        Args:
            text: What to remember.
            tags: Labels to find it again.
        '''
```

Parameters become the properties of an object schema (no default = required); a parameter
named `session` (or hinted `Session`) receives the call's session, one named `call` (or
hinted `Call`) the call context (attachments, session). The docstring's first part is the
description; `Args:` / `:param x:` / NumPy sections describe the parameters.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, Dict, List, Optional

from .schema import SchemaError, _summary, _with_default, _with_doc, convert, param_docs, schema_for

#: Whether a tool runs inside a session: `"none"`, `"required"` or `"optional"`.
SESSION_NEEDS = ("none", "required", "optional")


@dataclasses.dataclass
class Attachment:
    """Binary output of a tool (a screenshot, a file); MCP clients get it as image or
    resource content."""

    name: str
    mime_type: str
    data: bytes


@dataclasses.dataclass
class Output:
    """A result with attachments: `return Output({"ok": True}, [Attachment(...)])`."""

    content: Any = None
    attachments: List[Attachment] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ToolDef:
    """One registered tool: what `describe` reports and how to call it."""

    name: str
    description: str
    input_schema: Dict[str, Any]
    output_schema: Optional[Dict[str, Any]]
    session: str
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool
    method_name: str
    params: Dict[str, Any]
    wants_session: Optional[str]
    wants_call: Optional[str]


_TOOL_ATTR = "__wharf_tool__"


def _session_need(value: Any) -> str:
    if value is None or value is False:
        return "none"
    if value is True:
        return "required"
    text = str(getattr(value, "value", value)).lower()
    if text not in SESSION_NEEDS:
        raise ValueError(f"session must be one of {SESSION_NEEDS}, not {value!r}")
    return text


def _is_injected(name: str, hint: Any, type_name: str) -> bool:
    if name == type_name.lower():
        return True
    hint_name = getattr(hint, "__name__", None) or (hint if isinstance(hint, str) else "")
    return hint_name == type_name


def tool(
    name: Optional[str] = None,
    *,
    session: Any = "none",
    description: Optional[str] = None,
    read_only: bool = False,
    destructive: bool = False,
    idempotent: Optional[bool] = None,
    open_world: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a method as a tool named `name` (the action part; the host prefixes the
    backend's name). `session` is `"none"`, `"required"` or `"optional"`; the annotations
    are mirrored into MCP (`read_only` implies `idempotent`)."""
    if callable(name) and not isinstance(name, str):
        return tool()(name)
    need = _session_need(session)

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        action = name or fn.__name__
        if not action or any(c.isspace() for c in action) or ":" in action:
            raise ValueError(f"tool name {action!r} must be non-empty, without spaces or ':'")
        setattr(fn, _TOOL_ATTR, _definition(fn, action, need, description, read_only, destructive, idempotent, open_world))
        return fn

    return register


def _definition(
    fn: Callable[..., Any],
    action: str,
    need: str,
    description: Optional[str],
    read_only: bool,
    destructive: bool,
    idempotent: Optional[bool],
    open_world: bool,
) -> ToolDef:
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise SchemaError(f"tool {action!r}: cannot resolve its type hints: {exc}") from exc
    docs = param_docs(fn.__doc__)
    properties: Dict[str, Any] = {}
    required: List[str] = []
    params: Dict[str, Any] = {}
    wants_session = wants_call = None
    for index, (pname, param) in enumerate(signature.parameters.items()):
        if index == 0 and pname in ("self", "cls"):
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise SchemaError(f"tool {action!r}: *args/**kwargs have no schema; name each argument")
        hint = hints.get(pname, param.annotation)
        if _is_injected(pname, hint, "Session"):
            wants_session = pname
            continue
        if _is_injected(pname, hint, "Call"):
            wants_call = pname
            continue
        try:
            schema = schema_for(hint)
        except SchemaError as exc:
            raise SchemaError(f"tool {action!r}, argument {pname!r}: {exc}") from exc
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        elif param.default is not None or _nullable(schema):
            schema = _with_default(schema, param.default)
        properties[pname] = _with_doc(schema, docs.get(pname))
        params[pname] = hint
    input_schema: Dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    output_schema = None
    returns = hints.get("return")
    if returns is not None and returns is not type(None) and returns not in (Output, Attachment):
        try:
            output_schema = schema_for(returns)
        except SchemaError:
            output_schema = None
        if output_schema == {}:
            output_schema = None
    if need == "none" and wants_session:
        raise SchemaError(
            f"tool {action!r} takes a session argument but was registered with session=\"none\""
        )
    return ToolDef(
        name=action,
        description=description if description is not None else _summary(fn.__doc__),
        input_schema=input_schema,
        output_schema=output_schema,
        session=need,
        read_only=read_only,
        destructive=destructive and not read_only,
        idempotent=read_only if idempotent is None else bool(idempotent),
        open_world=open_world,
        method_name=fn.__name__,
        params=params,
        wants_session=wants_session,
        wants_call=wants_call,
    )


def _nullable(schema: Dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(branch.get("type") == "null" for branch in schema.get("anyOf", []))


def tools_of(cls: type) -> Dict[str, ToolDef]:
    """The tools a class (and its bases) registered, by action name, in definition order."""
    found: Dict[str, ToolDef] = {}
    for klass in reversed(cls.__mro__):
        for attr in vars(klass).values():
            definition = getattr(attr, _TOOL_ATTR, None)
            if isinstance(definition, ToolDef):
                found[definition.name] = definition
    return found


def bind_arguments(definition: ToolDef, args: Dict[str, Any]) -> Dict[str, Any]:
    """Keyword arguments for the method: the validated JSON converted to the hinted types."""
    return {k: convert(v, definition.params.get(k, Any)) for k, v in args.items() if k in definition.params}
