"""Outbound HTTP through the standard `wasi:http/outgoing-handler` (blocking calls).

```python
from wharf_sdk import http
r = http.get("https://api.example.com/items?q=1", headers={"accept": "application/json"})
r.status, r.headers["content-type"], r.json()
http.post("https://api.example.com/items", json={"name": "x"})
```

The host only lets through hosts granted to the backend (`grants.http_hosts`, declared in
`requires.http_hosts`). Failures raise `HttpError` with the same codes as the Rust SDK: a
refused request is 4030 with the host's reason naming the grant to add (`kind ==
"HttpRequestDenied"` or `"DestinationIpProhibited"`), a timeout 5006, anything else 5000
(retryable).
"""

from __future__ import annotations

import dataclasses
import json as _json
from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import urlsplit

from . import _wit
from .errors import EXECUTION_ERROR, FORBIDDEN, TIMEOUT, ToolError

#: Bytes written to the request body per call (the stream's guaranteed minimum).
_WRITE_CHUNK = 4096
_READ_CHUNK = 64 * 1024


#: `wasi:http` error codes that mean the host refused the request.
_DENIED = ("HttpRequestDenied", "DestinationIpProhibited")
#: `wasi:http` error codes that mean the peer did not answer in time.
_TIMEOUTS = (
    "ConnectionTimeout",
    "ConnectionReadTimeout",
    "ConnectionWriteTimeout",
    "HttpResponseTimeout",
)


class HttpError(ToolError):
    """The request failed before a response arrived (denied, DNS, connect, timeout …);
    `kind` names the `wasi:http` error code. The code follows the kind: 4030 for a denial,
    5006 for a timeout, else 5000."""

    def __init__(self, kind: str, message: str, code: Optional[int] = None, retryable: Optional[bool] = None) -> None:
        if code is None:
            code = FORBIDDEN if kind in _DENIED else TIMEOUT if kind in _TIMEOUTS else EXECUTION_ERROR
        if retryable is None:
            retryable = code != FORBIDDEN
        super().__init__(code, message, retryable=retryable, data={"http_error": kind})
        self.kind = kind


def failure(url: str, kind: str) -> HttpError:
    """A `wasi:http` failure as the error the caller sees. A refusal carries the host's
    reason (`egress.check`, which knows the operator's policy and names the grant)."""
    if kind in _DENIED:
        reason = None
        try:
            _wit.host_call(_wit.module("egress").check, url)
        except ToolError as why:
            reason = why.message
        except (RuntimeError, ImportError):
            pass  # natively, or a world without `egress`: the generic reason below
        return HttpError(
            kind,
            reason
            or f"outbound HTTP to `{url}` was refused ({kind}): the operator grants hosts with "
            "`grants.http_hosts` and loopback/private addresses with `grants.http_private_cidrs`",
        )
    if kind in _TIMEOUTS:
        return HttpError(kind, f"`{url}` did not answer in time ({kind})")
    return HttpError(kind, f"the request to `{url}` failed: {kind}")


@dataclasses.dataclass
class Response:
    """A complete response: status, headers (lower-case names) and body."""

    status: int
    header_list: List[Tuple[str, str]]
    body: bytes

    @property
    def headers(self) -> Dict[str, str]:
        """Headers by lower-case name (repeated headers joined with `, `)."""
        out: Dict[str, str] = {}
        for name, value in self.header_list:
            key = name.lower()
            out[key] = f"{out[key]}, {value}" if key in out else value
        return out

    @property
    def text(self) -> str:
        """The body as UTF-8 text (invalid bytes replaced)."""
        return _wit.as_text(self.body)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def raise_for_status(self) -> "Response":
        """Raises `HttpError` for a status of 400 or more."""
        if self.status >= 400:
            raise HttpError("HttpStatus", f"HTTP {self.status}: {self.text[:200]}")
        return self


def _method(types: Any, name: str) -> Any:
    upper = name.upper()
    known = {
        "GET": "Method_Get",
        "HEAD": "Method_Head",
        "POST": "Method_Post",
        "PUT": "Method_Put",
        "DELETE": "Method_Delete",
        "CONNECT": "Method_Connect",
        "OPTIONS": "Method_Options",
        "TRACE": "Method_Trace",
        "PATCH": "Method_Patch",
    }
    if upper in known:
        return getattr(types, known[upper])()
    return types.Method_Other(upper)


def _error_kind(code: Any) -> str:
    name = type(code).__name__
    return name.split("_", 1)[1] if name.startswith("ErrorCode_") else name


def request(
    method: str,
    url: str,
    *,
    headers: Optional[Dict[str, str]] = None,
    body: Union[None, bytes, str] = None,
    json: Any = None,
    timeout_ms: Optional[int] = None,
    max_bytes: int = 16 << 20,
) -> Response:
    """Sends one request and reads the whole response (at most `max_bytes` of body)."""
    types = _wit.module("wasi_http_types")
    handler = _wit.module("outgoing_handler")
    streams = _wit.module("streams")
    Err = _wit.err_class()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError.invalid_input(f"not an http(s) URL: {url!r}")
    header_map = {k.lower(): v for k, v in (headers or {}).items()}
    if json is not None:
        body = _json.dumps(json, separators=(",", ":"))
        header_map.setdefault("content-type", "application/json")
    payload = body.encode("utf-8") if isinstance(body, str) else body
    fields = types.Fields.from_list([(k, str(v).encode("latin-1")) for k, v in header_map.items()])
    outgoing = types.OutgoingRequest(fields)
    outgoing.set_method(_method(types, method))
    outgoing.set_scheme(types.Scheme_Https() if parts.scheme == "https" else types.Scheme_Http())
    authority = parts.netloc.rsplit("@", 1)[-1]
    outgoing.set_authority(authority)
    path = parts.path or "/"
    outgoing.set_path_with_query(f"{path}?{parts.query}" if parts.query else path)
    options = None
    if timeout_ms is not None:
        options = types.RequestOptions()
        nanos = int(timeout_ms) * 1_000_000
        options.set_connect_timeout(nanos)
        options.set_first_byte_timeout(nanos)
        options.set_between_bytes_timeout(nanos)
    outgoing_body = outgoing.body()
    try:
        future = handler.handle(outgoing, options)
    except Err as refused:
        raise failure(url, _error_kind(refused.value)) from None
    stream = outgoing_body.write()
    try:
        data = payload or b""
        for offset in range(0, len(data), _WRITE_CHUNK):
            stream.blocking_write_and_flush(data[offset : offset + _WRITE_CHUNK])
    except Err as broken:
        raise HttpError("BodyWrite", f"writing the request body failed: {broken.value!r}") from None
    finally:
        stream.__exit__(None, None, None)
    types.OutgoingBody.finish(outgoing_body, None)
    while True:
        answer = future.get()
        if answer is not None:
            break
        pollable = future.subscribe()
        pollable.block()
        pollable.__exit__(None, None, None)
    future.__exit__(None, None, None)
    if isinstance(answer, Err) or not hasattr(answer, "value"):
        raise HttpError("Internal", "the HTTP response was already taken")
    inner = answer.value
    if isinstance(inner, Err) or type(inner).__name__ == "Err":
        raise failure(url, _error_kind(inner.value))
    response = inner.value
    status = response.status()
    with response.headers() as response_headers:
        header_list = [(k, bytes(v).decode("latin-1")) for k, v in response_headers.entries()]
    incoming = response.consume()
    body_stream = incoming.stream()
    chunks: List[bytes] = []
    size = 0
    try:
        while True:
            try:
                chunk = body_stream.blocking_read(_READ_CHUNK)
            except Err as broken:
                if isinstance(broken.value, streams.StreamError_Closed):
                    break
                raise HttpError("BodyRead", f"reading the response body failed: {broken.value!r}") from None
            size += len(chunk)
            if size > max_bytes:
                raise HttpError("HttpResponseBodySize", f"the response body is larger than {max_bytes} bytes")
            chunks.append(bytes(chunk))
    finally:
        body_stream.__exit__(None, None, None)
        incoming.__exit__(None, None, None)
        response.__exit__(None, None, None)
    return Response(status, header_list, b"".join(chunks))


def get(url: str, **kwargs: Any) -> Response:
    """`GET url`."""
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> Response:
    """`POST url` with `body=` bytes/text or `json=` data."""
    return request("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> Response:
    """`PUT url`."""
    return request("PUT", url, **kwargs)


def delete(url: str, **kwargs: Any) -> Response:
    """`DELETE url`."""
    return request("DELETE", url, **kwargs)
