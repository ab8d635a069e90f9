"""JSON Schema from Python type hints, and arguments back into the hinted types.

Pure Python (it runs inside the component): `str`, `int`, `float`, `bool`, `None`,
`list[T]`, `tuple[...]`, `set[T]`, `dict[str, T]`, `Optional[T]` / `T | None`, unions,
`Literal[...]`, `Enum` subclasses, `TypedDict`, dataclasses and `Any`. The host validates
every call against the generated schema before the tool runs (4003 for a missing field,
4004 for a wrong type), so the conversion here only has to build the hinted objects.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from typing import Any, Dict, List, Optional, Tuple

_NONE = type(None)
_UNION_TYPES: Tuple[Any, ...] = (typing.Union,)
if hasattr(types, "UnionType"):
    _UNION_TYPES = (typing.Union, types.UnionType)


class SchemaError(TypeError):
    """A type hint that has no JSON Schema (raised when the class is defined)."""


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__annotations__") and hasattr(
        tp, "__total__"
    )


def _hints(obj: Any) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=False)
    except Exception as exc:  # a forward reference that does not resolve
        raise SchemaError(f"cannot resolve the type hints of {obj!r}: {exc}") from exc


def schema_for(tp: Any, _seen: Optional[set] = None) -> Dict[str, Any]:
    """The JSON Schema of one type hint."""
    seen = set() if _seen is None else _seen
    if tp is Any or tp is inspect.Parameter.empty or tp is object:
        return {}
    if tp is _NONE or tp is None:
        return {"type": "null"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is bytes:
        return {"type": "string", "contentEncoding": "base64"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in _UNION_TYPES:
        options = [a for a in args if a is not _NONE]
        nullable = len(options) != len(args)
        if len(options) == 1:
            inner = schema_for(options[0], seen)
            if not nullable:
                return inner
            if isinstance(inner.get("type"), str) and "enum" not in inner:
                return {**inner, "type": [inner["type"], "null"]}
            return {"anyOf": [inner, {"type": "null"}]}
        branches = [schema_for(a, seen) for a in options]
        if nullable:
            branches.append({"type": "null"})
        return {"anyOf": branches}
    if origin is typing.Literal:
        values = list(args)
        out: Dict[str, Any] = {"enum": values}
        kinds = {_json_type(v) for v in values}
        if len(kinds) == 1:
            out["type"] = kinds.pop()
        return out
    if origin in (list, List, typing.Sequence, set, frozenset) or tp in (list, set, frozenset):
        out = {"type": "array"}
        if args:
            out["items"] = schema_for(args[0], seen)
        if origin in (set, frozenset):
            out["uniqueItems"] = True
        return out
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for(args[0], seen)}
        items = [schema_for(a, seen) for a in args]
        return {
            "type": "array",
            "prefixItems": items,
            "minItems": len(items),
            "maxItems": len(items),
        }
    if origin in (dict, Dict, typing.Mapping) or tp is dict:
        out = {"type": "object"}
        if args:
            if args[0] is not str:
                raise SchemaError(f"{tp!r}: JSON object keys are strings; use dict[str, ...]")
            out["additionalProperties"] = schema_for(args[1], seen)
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        out = {"enum": values}
        kinds = {_json_type(v) for v in values}
        if len(kinds) == 1:
            out["type"] = kinds.pop()
        return out
    if _is_typeddict(tp):
        if tp in seen:
            raise SchemaError(f"{tp.__name__} refers to itself; recursive types have no schema here")
        seen = seen | {tp}
        hints = _hints(tp)
        required = sorted(getattr(tp, "__required_keys__", set(hints) if tp.__total__ else set()))
        docs = field_docs(tp)
        props = {}
        for name, hint in hints.items():
            props[name] = _with_doc(schema_for(hint, seen), docs.get(name))
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        return _with_doc(out, _summary(tp.__doc__))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp in seen:
            raise SchemaError(f"{tp.__name__} refers to itself; recursive types have no schema here")
        seen = seen | {tp}
        hints = _hints(tp)
        docs = field_docs(tp)
        props = {}
        required = []
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            schema = schema_for(hints.get(f.name, Any), seen)
            if f.default is not dataclasses.MISSING:
                schema = _with_default(schema, f.default)
            elif f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
                required.append(f.name)
            props[f.name] = _with_doc(schema, docs.get(f.name))
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        doc = tp.__doc__ or ""
        if doc.startswith(tp.__name__ + "("):  # the generated dataclass docstring
            doc = ""
        return _with_doc(out, _summary(doc))
    raise SchemaError(f"no JSON Schema for the type {tp!r}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    raise SchemaError(f"{value!r} is not a JSON scalar")


def _jsonable_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, set, frozenset)):
        return [_jsonable_default(v) for v in value]
    if isinstance(value, list):
        return [_jsonable_default(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable_default(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable_default(dataclasses.asdict(value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise SchemaError(f"the default {value!r} is not JSON")


def _with_default(schema: Dict[str, Any], default: Any) -> Dict[str, Any]:
    return {**schema, "default": _jsonable_default(default)}


def _with_doc(schema: Dict[str, Any], doc: Optional[str]) -> Dict[str, Any]:
    if doc:
        return {**schema, "description": doc}
    return schema


def _summary(doc: Optional[str]) -> str:
    """The docstring up to its first section (`Args:`, `:param`, `Returns:` …)."""
    if not doc:
        return ""
    text = inspect.cleandoc(doc)
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if _SECTION.match(stripped) or stripped.startswith(":"):
            break
        lines.append(line)
    return "\n".join(lines).strip()


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Raises|Yields|Examples?|Notes?|Attributes|Fields):\s*$"
)
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[\w\[\], .|]+\s+)?(\w+)\s*:\s*(.*)$")
_NUMPY_RULE = re.compile(r"^-{3,}$")


def param_docs(doc: Optional[str]) -> Dict[str, str]:
    """Per-parameter descriptions from a Google (`Args:`), NumPy or Sphinx (`:param x:`)
    style docstring."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    out: Dict[str, str] = {}
    # Sphinx.
    current: Optional[str] = None
    for line in lines:
        stripped = line.strip()
        m = _SPHINX_PARAM.match(stripped)
        if m:
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and stripped and not stripped.startswith(":"):
            out[current] = (out[current] + " " + stripped).strip()
        else:
            current = None
    # Google and NumPy.
    i = 0
    while i < len(lines):
        header = lines[i].strip()
        is_google = header in ("Args:", "Arguments:", "Parameters:", "Params:", "Attributes:", "Fields:")
        is_numpy = (
            header in ("Parameters", "Attributes")
            and i + 1 < len(lines)
            and _NUMPY_RULE.match(lines[i + 1].strip())
        )
        if not (is_google or is_numpy):
            i += 1
            continue
        base_indent = len(lines[i]) - len(lines[i].lstrip())
        i += 2 if is_numpy else 1
        name: Optional[str] = None
        item_indent: Optional[int] = None
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            indent = len(line) - len(line.lstrip())
            if stripped and indent <= base_indent and (
                _SECTION.match(stripped) or (is_numpy and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1].strip()))
            ):
                break
            if not stripped:
                if is_google and name is None:
                    i += 1
                    continue
                i += 1
                continue
            if item_indent is None:
                item_indent = indent
            if indent == item_indent:
                if is_numpy:
                    name = stripped.split(":")[0].strip()
                    out.setdefault(name, "")
                else:
                    m = _GOOGLE_ITEM.match(stripped)
                    if m:
                        name = m.group(1).lstrip("*")
                        out[name] = m.group(3).strip()
                    else:
                        break
            elif name is not None and indent > item_indent:
                out[name] = (out.get(name, "") + " " + stripped).strip()
            i += 1
    return {k: v for k, v in out.items() if v}


def field_docs(cls: type) -> Dict[str, str]:
    """Field descriptions of a dataclass or TypedDict: from its docstring's `Attributes:`
    section, or a string literal right after the field (the attribute-docstring habit)."""
    docs = param_docs(cls.__doc__)
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return docs
    lines = source.splitlines()
    for index, line in enumerate(lines[:-1]):
        m = re.match(r"^\s+(\w+)\s*:", line)
        nxt = lines[index + 1].strip()
        if m and (nxt.startswith('"""') or nxt.startswith("'''")) and m.group(1) not in docs:
            quote = nxt[:3]
            body = nxt[3:]
            if body.endswith(quote):
                docs[m.group(1)] = body[:-3].strip()
    return docs


def convert(value: Any, tp: Any) -> Any:
    """Builds the hinted type from validated JSON (dataclasses, enums, tuples, sets)."""
    if value is None or tp is Any or tp is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in _UNION_TYPES:
        for option in args:
            if option is _NONE:
                continue
            try:
                return convert(value, option)
            except (TypeError, ValueError, KeyError):
                continue
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__} needs an object")
        hints = _hints(tp)
        kwargs = {k: convert(v, hints.get(k, Any)) for k, v in value.items()}
        return tp(**kwargs)
    if _is_typeddict(tp) and isinstance(value, dict):
        hints = _hints(tp)
        return {k: convert(v, hints.get(k, Any)) for k, v in value.items()}
    if origin in (list, List, typing.Sequence) and isinstance(value, list):
        return [convert(v, args[0]) for v in value] if args else value
    if origin in (set, frozenset) and isinstance(value, list):
        items = [convert(v, args[0]) for v in value] if args else value
        return origin(items)
    if origin is tuple and isinstance(value, list):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(v, args[0]) for v in value)
        return tuple(convert(v, t) for v, t in zip(value, args))
    if origin in (dict, Dict, typing.Mapping) and isinstance(value, dict) and len(args) == 2:
        return {k: convert(v, args[1]) for k, v in value.items()}
    if tp is bytes and isinstance(value, str):
        import base64

        return base64.b64decode(value)
    return value


def to_json(value: Any) -> Any:
    """A tool's return value as JSON-ready data: dataclasses, enums, tuples, sets and bytes
    (base64) are converted; anything else must already be JSON."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [to_json(v) for v in sorted(value, key=repr)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "to_json") and callable(value.to_json):
        return to_json(value.to_json())
    raise TypeError(f"a {type(value).__name__} is not JSON; return a dict, list, str, number, bool or dataclass")
