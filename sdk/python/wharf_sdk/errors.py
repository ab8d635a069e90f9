"""Errors with a code from Wharf's table (listed in ARCHITECTURE.md)."""

from __future__ import annotations

from typing import Any, Optional

#: The arguments make no sense for this tool.
INVALID_INPUT = 4000
#: The tool ran and said no.
BUSINESS_FAILURE = 4001
#: The request itself was malformed.
INVALID_REQUEST = 4002
#: A required field is missing.
MISSING_FIELD = 4003
#: A parameter has the wrong type.
INVALID_TYPE = 4004
#: Nothing matched.
NO_RESULTS = 4006
#: The session is unknown or not initialized.
SESSION_NOT_FOUND = 4007
#: Not allowed: a grant the operator has not given.
FORBIDDEN = 4030
#: The tool failed (also what an uncaught Python exception becomes).
EXECUTION_ERROR = 5000
#: The tool ran out of time.
TIMEOUT = 5006


class ToolError(Exception):
    """A failure the caller sees as `{code, message, retryable, data}`.

    A backend may return 4000–4004, 4006, 4007, 4030, 5000, 5006 and 5012; the host turns
    any other code into 5000.
    """

    def __init__(
        self,
        code: int,
        message: str,
        retryable: bool = False,
        data: Optional[Any] = None,
    ) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = str(message)
        self.retryable = bool(retryable)
        self.data = data

    def __repr__(self) -> str:
        return f"ToolError({self.code}, {self.message!r}, retryable={self.retryable})"

    def __str__(self) -> str:
        return f"{self.message} ({self.code})"

    @classmethod
    def invalid_input(cls, message: str, data: Any = None) -> "ToolError":
        """4000: the arguments make no sense for this tool."""
        return cls(INVALID_INPUT, message, data=data)

    @classmethod
    def business(cls, message: str, data: Any = None) -> "ToolError":
        """4001: the tool ran and said no."""
        return cls(BUSINESS_FAILURE, message, data=data)

    @classmethod
    def no_results(cls, message: str, data: Any = None) -> "ToolError":
        """4006: nothing matched."""
        return cls(NO_RESULTS, message, data=data)

    @classmethod
    def session_not_found(cls, message: str, data: Any = None) -> "ToolError":
        """4007: the session is unknown, gone or not initialized."""
        return cls(SESSION_NOT_FOUND, message, data=data)

    @classmethod
    def forbidden(cls, message: str, data: Any = None) -> "ToolError":
        """4030: not allowed (a grant is missing; say which)."""
        return cls(FORBIDDEN, message, data=data)

    @classmethod
    def execution(cls, message: str, data: Any = None, retryable: bool = False) -> "ToolError":
        """5000: the tool failed."""
        return cls(EXECUTION_ERROR, message, retryable=retryable, data=data)

    @classmethod
    def timeout(cls, message: str, data: Any = None) -> "ToolError":
        """5006: the tool ran out of time (retryable)."""
        return cls(TIMEOUT, message, retryable=True, data=data)

    @classmethod
    def from_exception(cls, exc: BaseException) -> "ToolError":
        """What an uncaught exception becomes: 5000 with its message and type."""
        if isinstance(exc, ToolError):
            return exc
        kind = type(exc).__name__
        text = str(exc) or kind
        data = {"exception": kind, "message": str(exc)}
        # Where it was raised, like a Rust panic's location: the innermost frame.
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            code = tb.tb_frame.f_code
            data["at"] = f"{code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno} in {code.co_name}"
        return cls(EXECUTION_ERROR, text, data=data)
