"""Native tests of the SDK's pure-Python parts: schemas from type hints, docstrings,
argument conversion, dispatch, session data, errors. Run: `python -m unittest discover
sdk/python/tests` (scripts/test does)."""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import types
import unittest
from pathlib import Path
from typing import Dict, List, Literal, Optional, Tuple, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wharf_sdk import Backend, Call, Discovery, Output, Attachment, Session, ToolError, tool  # noqa: E402
from wharf_sdk.backend import Runtime, SessionRecord, find_class  # noqa: E402
from wharf_sdk.build import detect_world  # noqa: E402
from wharf_sdk.schema import SchemaError, param_docs, schema_for  # noqa: E402


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    """A point.

    Attributes:
        x: Across.
    """

    x: int
    y: int = 0
    """Down."""


class Movie(TypedDict):
    title: str
    year: int


class Demo(Backend):
    name = "demo"

    def __init__(self) -> None:
        self.warm = None

    def warmup(self, config):
        if config and config.get("fail"):
            raise RuntimeError("no database")
        self.warm = config

    def initialize(self, session_id, key, config):
        return {"items": [], "key": key}

    @tool("add", read_only=True)
    def add(self, a: int, b: float = 1.5) -> float:
        """Adds two numbers.

        Args:
            a: The first.
            b: The second,
                on two lines.
        """
        return a + b

    @tool("move")
    def move(self, p: Point, colour: Colour = Colour.RED, tags: Optional[List[str]] = None) -> dict:
        """Moves a point."""
        assert isinstance(p, Point)
        assert isinstance(colour, Colour)
        return {"p": p, "colour": colour, "tags": tags}

    @tool("push", session="required")
    def push(self, item: str, session: Session) -> dict:
        session.data["items"].append(item)
        return {"n": len(session.data["items"])}

    @tool("peek", session="optional")
    def peek(self, call: Call) -> dict:
        call.attach("a.txt", "text/plain", b"hi")
        return {"has_session": call.session is not None}

    @tool("boom")
    def boom(self) -> None:
        raise KeyError("missing")

    @tool("refuse")
    def refuse(self, why: str) -> None:
        raise ToolError.business(why, data={"why": why})

    @tool("picture")
    def picture(self) -> Output:
        return Output({"ok": True}, [Attachment("p.png", "image/png", b"\x89PNG")])

    @tool("movie")
    def movie(self, m: Movie, pair: Tuple[int, str], mode: Literal["a", "b"] = "a", extra: Dict[str, int] = {}) -> Movie:
        return m


def record(data: object) -> SessionRecord:
    return SessionRecord("s1", "k1", json.dumps(data), 0, None)


class SchemaTests(unittest.TestCase):
    def setUp(self) -> None:
        self.rt = Runtime(Demo)

    def test_scalars_defaults_and_docs(self) -> None:
        add = self.rt.tools["add"]
        self.assertEqual(add.description, "Adds two numbers.")
        self.assertEqual(add.input_schema["required"], ["a"])
        self.assertEqual(add.input_schema["properties"]["a"], {"type": "integer", "description": "The first."})
        self.assertEqual(add.input_schema["properties"]["b"]["default"], 1.5)
        self.assertEqual(add.input_schema["properties"]["b"]["description"], "The second, on two lines.")
        self.assertFalse(add.input_schema["additionalProperties"])
        self.assertEqual(add.output_schema, {"type": "number"})
        self.assertTrue(add.read_only and add.idempotent)

    def test_dataclass_enum_optional(self) -> None:
        props = self.rt.tools["move"].input_schema["properties"]
        point = props["p"]
        self.assertEqual(point["required"], ["x"])
        self.assertEqual(point["properties"]["x"]["description"], "Across.")
        self.assertEqual(point["properties"]["y"]["description"], "Down.")
        self.assertEqual(point["description"], "A point.")
        self.assertEqual(props["colour"], {"enum": ["red", "blue"], "type": "string", "default": "red"})
        self.assertEqual(props["tags"]["type"], ["array", "null"])

    def test_typeddict_tuple_literal_dict(self) -> None:
        props = self.rt.tools["movie"].input_schema["properties"]
        self.assertEqual(props["m"]["required"], ["title", "year"])
        self.assertEqual(props["pair"]["prefixItems"], [{"type": "integer"}, {"type": "string"}])
        self.assertEqual(props["mode"]["enum"], ["a", "b"])
        self.assertEqual(props["extra"]["additionalProperties"], {"type": "integer"})

    def test_injected_parameters_are_not_arguments(self) -> None:
        self.assertEqual(list(self.rt.tools["push"].input_schema["properties"]), ["item"])
        self.assertEqual(self.rt.tools["push"].session, "required")
        self.assertEqual(self.rt.tools["peek"].input_schema["properties"], {})

    def test_unsupported_hints_fail_at_definition(self) -> None:
        with self.assertRaises(SchemaError):
            schema_for(Dict[int, str])
        with self.assertRaises(SchemaError):

            class Bad(Backend):
                @tool("x")
                def x(self, f: complex) -> None: ...

        with self.assertRaises(SchemaError):

            class NoSession(Backend):
                @tool("x")
                def x(self, session: Session) -> None: ...

    def test_sphinx_and_numpy_docstrings(self) -> None:
        self.assertEqual(param_docs(":param a: first\n:param int b: second\n  more"), {"a": "first", "b": "second more"})
        numpy = "Does.\n\nParameters\n----------\nx : int\n    The x.\ny : str\n    The y.\n"
        self.assertEqual(param_docs(numpy), {"x": "The x.", "y": "The y."})


class DispatchTests(unittest.TestCase):
    def setUp(self) -> None:
        self.rt = Runtime(Demo)

    def test_call_converts_arguments(self) -> None:
        reply = self.rt.call("move", json.dumps({"p": {"x": 1}, "colour": "blue"}), None)
        self.assertEqual(json.loads(reply.content), {"p": {"x": 1, "y": 0}, "colour": "blue", "tags": None})
        self.assertIsNone(reply.session_data)

    def test_session_data_changes_are_returned(self) -> None:
        reply = self.rt.call("push", '{"item": "a"}', record({"items": ["z"], "key": "k1"}))
        self.assertEqual(json.loads(reply.session_data), {"items": ["z", "a"], "key": "k1"})
        reply = self.rt.call("peek", "{}", record({"items": []}))
        self.assertIsNone(reply.session_data, "unchanged data is not sent back")
        self.assertEqual(reply.attachments[0].name, "a.txt")

    def test_required_session_and_unknown_tool(self) -> None:
        with self.assertRaises(ToolError) as err:
            self.rt.call("push", '{"item": "a"}', None)
        self.assertEqual(err.exception.code, 4007)
        with self.assertRaises(ToolError) as err:
            self.rt.call("nope", "{}", None)
        self.assertEqual(err.exception.code, 4002)

    def test_exceptions_become_5000_with_type(self) -> None:
        with self.assertRaises(ToolError) as err:
            self.rt.call("boom", "{}", None)
        self.assertEqual((err.exception.code, err.exception.message), (5000, "'missing'"))
        self.assertEqual(err.exception.data["exception"], "KeyError")
        with self.assertRaises(ToolError) as err:
            self.rt.call("refuse", '{"why": "closed"}', None)
        self.assertEqual((err.exception.code, err.exception.data), (4001, {"why": "closed"}))

    def test_output_with_attachments(self) -> None:
        reply = self.rt.call("picture", "{}", None)
        self.assertEqual(json.loads(reply.content), {"ok": True})
        self.assertEqual(reply.attachments[0].mime_type, "image/png")

    def test_hooks(self) -> None:
        self.rt.warmup('{"a": 1}')
        self.assertEqual(self.rt.instance.warm, {"a": 1})
        with self.assertRaises(ToolError) as err:
            self.rt.warmup('{"fail": true}')
        self.assertEqual(err.exception.message, "no database")
        self.assertEqual(json.loads(self.rt.initialize("s", "key-1", "")), {"items": [], "key": "key-1"})
        self.assertIs(self.rt.discover(record({})), Discovery.ALIVE)

    def test_describe(self) -> None:
        info = self.rt.describe()
        self.assertEqual(info["name"], "demo")
        self.assertEqual([t.name for t in info["tools"]][:3], ["add", "move", "push"])


class BuildTests(unittest.TestCase):
    def test_world_detection(self) -> None:
        self.assertEqual(detect_world("from wharf_sdk import Backend\nclass A(Backend): pass\n"), "backend")
        self.assertEqual(detect_world("import wharf_sdk\nclass A(wharf_sdk.Provider): pass\n"), "provider")

    def test_find_class(self) -> None:
        module = types.ModuleType("m")
        exec("from wharf_sdk import Backend\nclass A(Backend): pass\n", module.__dict__)
        self.assertEqual(find_class(module, Backend).__name__, "A")
        exec("class B(Backend): pass\n", module.__dict__)
        with self.assertRaises(TypeError):
            find_class(module, Backend)


class AgentImportTests(unittest.TestCase):
    """`files` and `process` refuse bad arguments before reaching the host (their calls to
    the host are tested against a real container: tests/python_backend.rs)."""

    def test_a_negative_offset_or_an_unknown_signal_is_refused_here(self) -> None:
        from wharf_sdk import files, process

        with self.assertRaises(ValueError):
            files.read("c", "/a", offset=-1)
        with self.assertRaises(ValueError):
            process.signal("c", 1, "SIGTERM")
        self.assertIn("kill", process.SIGNALS)


if __name__ == "__main__":
    unittest.main()
