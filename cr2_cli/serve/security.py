"""`cr2 serve`'s security layer: who may call, and what a request may carry — before any handler runs.

- `Guard` (ASGI middleware) checks every HTTP request: the Host header must name the server (loopback names,
  the bound address, `serving.allowed_hosts`; a DNS-rebinding page gets 400), a browser Origin other than the
  server's own (or `serving.allowed_origins`) gets 403, the bearer token when one is set (401), and a POST
  must be `application/json` (415) with a declared size ≤ `serving.max_body_bytes` (413). A request that passes
  the Host, Origin and token checks is marked authenticated in its scope (the metrics count nothing else by label).
  A request carrying both Content-Length and Transfer-Encoding is answered with `Connection: close` and its
  connection closed after the answer (RFC 9112 §6.1: its framing is ambiguous, a request-smuggling vector).
- `check_exposure`: binding beyond loopback needs a bearer token (a ConfigError otherwise).
- Bodies are read bounded (`read_body`) and parsed strictly (`parse_bounded_json`: no NaN / Infinity, nesting
  ≤ MAX_JSON_DEPTH, at most MAX_JSON_VALUES values, counted before parsing starts); the handlers parse and check
  in a worker thread, off the event loop; `number` parses a header or field value into a finite number in range,
  or a 422.
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import re
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request
from pydantic import ValidationError

from cr2.core.boundary import check_texts, parse_number, printable
from cr2.config import Config
from cr2.core.errors import ConfigError, InvalidValueError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
AUTHENTICATED_SCOPE_KEY = "cr2.authenticated"  # set in a request's ASGI scope once the Guard let it through
MAX_JSON_DEPTH = 64  # nesting of objects / arrays accepted in any JSON the server reads (requests, upstream answers)
# values (objects, arrays, members, elements) accepted in any JSON the server reads: a chat request or completion
# holds tens to thousands; a 1 MB body of 340,000 empty objects, or an answer of 4M keys, is refused before parsing
MAX_JSON_VALUES = 100_000
# a JSON string (escapes included), or one structural character outside strings
_JSON_STRUCTURE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[,:\[{]')


class HttpError(Exception):
    """A request problem answered with `status` and a JSON {"detail": …}."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}



def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# a Host header: a bracketed IPv6 literal or a name / IPv4 address of DNS characters, then an optional numeric port
_HOST_HEADER = re.compile(r"(?:\[(?P<ip6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?")


def host_name(value: str) -> str | None:
    """The host part of a Host header value ("127.0.0.1:8080" → "127.0.0.1", "[::1]:80" → "::1"), lower-cased;
    None when the value is not exactly a host and an optional port ("[::1]evil.com", "localhost:80@evil.com")."""
    value = value.strip().lower()
    m = _HOST_HEADER.fullmatch(value)
    if m is None:
        return value if ":" in value and _bare_ipv6(value) else None
    return m.group("ip6") or m.group("name")


def _bare_ipv6(value: str) -> bool:
    """True for an unbracketed IPv6 address (a bind address such as "::1", never a valid Host header)."""
    try:
        return ipaddress.ip_address(value).version == 6
    except ValueError:
        return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; send a finite number")


def _json_depth_exceeds(value: Any, limit: int) -> bool:
    """True when `value` nests objects / arrays deeper than `limit` (iterative: no recursion on hostile input)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


class TooManyJsonValues(ValueError):
    """A JSON text with more values than the budget (MAX_JSON_VALUES), refused before it was parsed."""


def json_values_exceed(raw: bytes, limit: int) -> bool:
    """Whether the JSON text `raw` holds more than `limit` values, decided without parsing it.

    Every value after the first is announced by a comma, a colon or an opening bracket outside strings. Counting
    those characters in the whole text (strings included) is an upper bound at C speed, enough for any ordinary
    document; only above the limit are strings skipped, and that count stops as soon as it passes the limit. So a
    hostile text costs O(limit), never the seconds of building millions of Python objects."""
    if sum(raw.count(c) for c in (b",", b":", b"[", b"{")) < limit:
        return False
    n = 0
    for m in _JSON_STRUCTURE.finditer(raw):
        if m.end() - m.start() == 1 and raw[m.start()] != 0x22:  # a structural character, not a string
            n += 1
            if n >= limit:
                return True
    return False


def parse_bounded_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH, max_values: int = MAX_JSON_VALUES) -> Any:
    """Strict, bounded JSON: NaN / Infinity literals and nesting deeper than `max_depth` are ValueErrors; more
    than `max_values` values a TooManyJsonValues, raised before parsing starts.

    The size is bounded by the caller (it reads at most max_body_bytes / max_response_bytes); Python's json
    raises RecursionError for very deep input, turned into the same ValueError here. CPU-bound for large input:
    call it off the event loop (a worker thread)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if json_values_exceed(raw, max_values):
        raise TooManyJsonValues(f"holds more than {max_values:,} JSON values")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    if _json_depth_exceeds(value, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def parse_json(raw: bytes) -> Any:
    """The request body as strict, bounded JSON whose every string is well-formed Unicode, or a 422 naming the
    problem (NaN / Infinity literals, nesting > MAX_JSON_DEPTH, a lone surrogate such as "\\ud83d")."""
    try:
        return check_texts(parse_bounded_json(raw))
    except InvalidValueError as exc:
        raise HttpError(422, str(exc)) from None
    except TooManyJsonValues as exc:
        raise HttpError(413, f"the request body {exc} (the limit of any request)") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError; so are the NaN/Infinity and depth refusals
        raise HttpError(422, f"the request body is not valid JSON: {exc}") from None


def number(value: Any, name: str, low: float, high: float | None = None) -> float:
    """A finite number low < value (< high), or a 422 naming the field; strings (from headers) are parsed and
    integers range-checked before conversion (cr2.core.boundary.parse_number)."""
    try:
        return parse_number(value, name, low, high)
    except InvalidValueError as exc:
        raise HttpError(422, str(exc)) from None


def validation_detail(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


class Guard:
    """ASGI middleware: Host, Origin, bearer token, JSON content type and declared body size, before any handler."""

    def __init__(self, app, *, token: str | None, hosts: set[str], origins: set[str], max_body_bytes: int):
        self.app, self.token, self.hosts, self.origins = app, token, hosts, origins
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if "content-length" in headers and "transfer-encoding" in headers:
            send = closing_send(send)
        problem = self._authenticate(headers)
        if problem is None:
            scope[AUTHENTICATED_SCOPE_KEY] = True
            problem = self._check_body(scope, headers)
        if problem is not None:
            return await send_json(send, problem.status, {"detail": problem.detail}, problem.headers)
        return await self.app(scope, receive, send)

    def _authenticate(self, headers: dict[str, str]) -> HttpError | None:
        """The Host, Origin and bearer-token checks: who may call."""
        host = headers.get("host", "")
        name = host_name(host)
        if name is None:
            return HttpError(400, f"Host {printable(ascii(host))} is not a host name with an optional port")
        if "*" not in self.hosts and name not in self.hosts:
            return HttpError(400, f"Host {host!r} is not served here; add it to serving.allowed_hosts if it names "
                                  "this server")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                return HttpError(403, f"requests from the browser origin {origin!r} are not allowed; add it to "
                                      "serving.allowed_origins to allow it")
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                return HttpError(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                 {"www-authenticate": "Bearer"})
        return None

    def _check_body(self, scope, headers: dict[str, str]) -> HttpError | None:
        """What an authenticated POST may carry: a JSON content type and a declared size within the limit."""
        if scope["method"] == "POST":
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                return HttpError(415, f"POST bodies must be application/json, got {ctype or 'no content type'!r}")
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                return HttpError(413, f"the request body has {length} bytes; the limit is {self.max_body_bytes:,} "
                                      "(serving.max_body_bytes)")
        return None


def closing_send(send):
    """`send` with `Connection: close` added to the response's headers: the server closes the connection after it."""

    async def wrapped(message):
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": headers + [(b"connection", b"close")]}
        await send(message)

    return wrapped


async def send_json(send, status: int, content: Any, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(content).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class ClientGone(Exception):
    """The client disconnected (or was disconnected for sending too slowly) before its request body was read:
    nobody is left to answer. The metrics middleware counts it as its own outcome, not as a server error."""

    def __init__(self, received_bytes: int):
        super().__init__(f"client disconnected after {received_bytes:,} body bytes")
        self.received_bytes = received_bytes


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, or 413 as soon as it exceeds `limit` bytes (chunked bodies have no Content-Length);
    ClientGone when the client disconnects before the body is complete."""
    from starlette.requests import ClientDisconnect

    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"the request body exceeds {limit:,} bytes (serving.max_body_bytes)")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientGone(size) from None
    return b"".join(chunks)


def allowed_hosts(config: Config, bind_host: str) -> set[str]:
    """Host names the server answers to: loopback names, the bound address (unless a wildcard), the configured ones."""
    hosts = set(LOOPBACK_NAMES) | {h.lower() for h in config.serving.allowed_hosts}
    if bind_host not in ("0.0.0.0", "::", ""):
        hosts.add(host_name(bind_host))
    return hosts



def check_exposure(serving: Any, token: str | None, bind_host: str) -> None:
    """A ConfigError when the server would be reachable beyond this machine without a bearer token, or the token
    is blank."""
    if token is not None and not token.strip():
        raise ConfigError(f"the bearer token (${serving.token_env}) is empty; set a long random value or unset it")
    if token is None and not is_loopback(bind_host):
        raise ConfigError(f"binding to {bind_host} exposes the router (and the upstream API key) beyond this machine; "
                          f"set a bearer token in ${serving.token_env} first (e.g. `export {serving.token_env}=$(openssl "
                          "rand -hex 32)`), or bind to 127.0.0.1")
