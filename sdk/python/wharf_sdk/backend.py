"""Resource backends: a class with `@tool` methods and optional lifecycle hooks.

The host pools instances of the component: `warmup` runs once per instance (possibly for
several at once, so shared external resources must be created idempotently) and an
instance serves one call at a time. Module-level code runs once, when the component is
built (componentize-py pre-initializes it), so it must not call the host.
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from typing import Any, Dict, List, Optional, Union

from . import errors
from .errors import ToolError
from .schema import schema_for, to_json
from .tools import Attachment, Output, ToolDef, bind_arguments, tools_of


@dataclasses.dataclass
class Capabilities:
    """What the backend will ask the host for; asking at run time for more is refused."""

    images: List[str] = dataclasses.field(default_factory=list)
    http_hosts: List[str] = dataclasses.field(default_factory=list)
    networks: List[str] = dataclasses.field(default_factory=list)
    host_mounts: List[str] = dataclasses.field(default_factory=list)


class Session:
    """The session a hook or tool runs in. `data` is the JSON the host stores for it: read
    it, change it in place or replace it, and the host stores the new value after the call."""

    def __init__(
        self,
        id: str,
        key: str,
        data: Any,
        created_at_ms: int = 0,
        expires_at_ms: Optional[int] = None,
    ) -> None:
        self.id = id
        self.key = key
        self.data = data
        self.created_at_ms = created_at_ms
        self.expires_at_ms = expires_at_ms

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, key={self.key!r})"


class Call:
    """What a tool can see and add besides its arguments."""

    def __init__(self, session: Optional[Session]) -> None:
        self.session = session
        self.attachments: List[Attachment] = []

    def attach(self, name: str, mime_type: str, data: bytes) -> None:
        """Adds binary output (a PNG, a file) to the result."""
        self.attachments.append(Attachment(name, mime_type, bytes(data)))

    def require_session(self) -> Session:
        """The session, or a 4007 error when the call has none."""
        if self.session is None:
            raise ToolError.session_not_found("this tool needs a session")
        return self.session


class Discovery:
    """What `discover` answers: `Discovery.ALIVE`, `Discovery.GONE` or
    `Discovery.alive_with(data)` (also `True`, `False`, or a dict for alive-with)."""

    ALIVE: "Discovery"
    GONE: "Discovery"

    def __init__(self, kind: str, data: Any = None) -> None:
        self.kind = kind
        self.data = data

    @classmethod
    def alive_with(cls, data: Any) -> "Discovery":
        """Usable with repaired session data."""
        return cls("alive-with", data)

    def __repr__(self) -> str:
        return f"Discovery({self.kind!r})"


Discovery.ALIVE = Discovery("alive")
Discovery.GONE = Discovery("gone")


class Backend:
    """Subclass it, set `name`, `version`, `description` (and optionally `requires`,
    `config_schema`, `session_config_schema` — a type or a JSON Schema dict), and add
    `@tool` methods. Every hook has a default."""

    name: str = ""
    version: str = "0.1.0"
    description: str = ""
    requires: Capabilities = Capabilities()
    config_schema: Any = None
    session_config_schema: Any = None

    def warmup(self, config: Any) -> None:
        """Builds shared resources; `config` is the operator's JSON (`None` when none)."""

    def shutdown(self) -> None:
        """Releases shared resources before the instance is dropped."""

    def initialize(self, session_id: str, key: str, config: Any) -> Any:
        """Creates per-session resources and returns the session data the host stores."""
        return {}

    def cleanup(self, session: Session) -> None:
        """Releases per-session resources; must succeed when they are already gone."""

    def discover(self, session: Session) -> Any:
        """Whether a stored session is still usable."""
        return Discovery.ALIVE


def _schema_text(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, dict):
        return json.dumps(value)
    return json.dumps(schema_for(value))


def _parse_json(text: str, what: str) -> Any:
    if not text or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ToolError.invalid_input(f"{what} is not JSON: {exc}") from exc


def _dumps(value: Any, what: str) -> str:
    try:
        return json.dumps(to_json(value), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ToolError.execution(f"{what} is not JSON: {exc}") from exc


def report(exc: BaseException, where: str) -> ToolError:
    """The coded error an exception becomes; an uncaught one is also logged with its
    traceback (through the host's log), since only its message and type reach the caller."""
    err = ToolError.from_exception(exc)
    if not isinstance(exc, ToolError):
        from . import log

        log.error(f"{where}: uncaught {type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))}")
    return err


@dataclasses.dataclass
class ToolReply:
    """A tool's answer, as the export glue hands it to the host."""

    content: str
    attachments: List[Attachment]
    session_data: Optional[str]


@dataclasses.dataclass
class SessionRecord:
    """A session as the host hands it over (its data still JSON text)."""

    id: str
    key: str
    data: str
    created_at_ms: int
    expires_at_ms: Optional[int]

    def view(self) -> Session:
        try:
            data = json.loads(self.data) if self.data else None
        except ValueError:
            data = None
        return Session(self.id, self.key, data, self.created_at_ms, self.expires_at_ms)


class Runtime:
    """Drives one `Backend` subclass from the host's calls (JSON text in and out).
    Pure Python: the component glue and native tests both use it."""

    def __init__(self, cls: type) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"{cls!r} is not a wharf_sdk.Backend subclass")
        self.cls = cls
        self.tools: Dict[str, ToolDef] = tools_of(cls)
        self._instance: Optional[Backend] = None

    @property
    def instance(self) -> Backend:
        # Created on first use, inside the running component, never at build time.
        if self._instance is None:
            self._instance = self.cls()
        return self._instance

    def describe(self) -> Dict[str, Any]:
        cls = self.cls
        requires = cls.requires if isinstance(cls.requires, Capabilities) else Capabilities(**dict(cls.requires))
        return {
            "name": cls.name or cls.__name__.lower(),
            "version": cls.version,
            "description": cls.description or (cls.__doc__ or "").strip().split("\n\n")[0],
            "tools": list(self.tools.values()),
            "config_schema": _schema_text(cls.config_schema),
            "session_config_schema": _schema_text(cls.session_config_schema),
            "requires": requires,
        }

    def warmup(self, config: str) -> None:
        try:
            self.instance.warmup(_parse_json(config, "the config"))
        except BaseException as exc:
            raise report(exc, "warmup") from None

    def shutdown(self) -> None:
        try:
            self.instance.shutdown()
        except BaseException as exc:
            report(exc, "shutdown")

    def initialize(self, session_id: str, key: str, config: str) -> str:
        try:
            data = self.instance.initialize(session_id, key, _parse_json(config, "the session config"))
            return _dumps({} if data is None else data, "the session data")
        except BaseException as exc:
            raise report(exc, "initialize") from None

    def cleanup(self, session: SessionRecord) -> None:
        try:
            self.instance.cleanup(session.view())
        except BaseException as exc:
            raise report(exc, "cleanup") from None

    def discover(self, session: SessionRecord) -> Discovery:
        try:
            verdict = self.instance.discover(session.view())
        except BaseException as exc:
            raise report(exc, "discover") from None
        if verdict is None or verdict is True:
            return Discovery.ALIVE
        if verdict is False:
            return Discovery.GONE
        if isinstance(verdict, Discovery):
            if verdict.kind == "alive-with":
                return Discovery("alive-with", _dumps(verdict.data, "the repaired session data"))
            return verdict
        return Discovery("alive-with", _dumps(verdict, "the repaired session data"))

    def call(self, tool: str, args: str, session: Optional[SessionRecord]) -> ToolReply:
        try:
            return self._call(tool, args, session)
        except BaseException as exc:
            raise report(exc, f"tool {tool!r}") from None

    def _call(self, tool: str, args: str, record: Optional[SessionRecord]) -> ToolReply:
        definition = self.tools.get(tool)
        if definition is None:
            raise ToolError(errors.INVALID_REQUEST, f"unknown tool `{tool}`")
        parsed = _parse_json(args, "the arguments")
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise ToolError(errors.INVALID_TYPE, "the arguments must be a JSON object")
        session = record.view() if record is not None else None
        if definition.session == "required" and session is None:
            raise ToolError.session_not_found(f"`{tool}` needs a session")
        kwargs = bind_arguments(definition, parsed)
        call = Call(session)
        if definition.wants_session:
            kwargs[definition.wants_session] = session
        if definition.wants_call:
            kwargs[definition.wants_call] = call
        method = getattr(self.instance, definition.method_name)
        result = method(**kwargs)
        attachments = list(call.attachments)
        if isinstance(result, Output):
            attachments.extend(result.attachments)
            result = result.content
        elif isinstance(result, Attachment):
            attachments.append(result)
            result = {"attachment": result.name}
        session_data = None
        if session is not None:
            new_data = _dumps(session.data, "the session data")
            if record is None or new_data != _canonical(record.data):
                session_data = new_data
        return ToolReply(_dumps(result, "the result"), attachments, session_data)


def _canonical(text: str) -> Optional[str]:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), allow_nan=False)
    except ValueError:
        return None


def find_class(module: Any, base: type) -> type:
    """The one subclass of `base` defined in `module` (the class the build exports)."""
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = ", ".join(c.__name__ for c in found) or "none"
        raise TypeError(
            f"{module.__name__} must define exactly one {base.__name__} subclass (found {names})"
        )
    return found[0]


JsonValue = Union[None, bool, int, float, str, List[Any], Dict[str, Any]]
