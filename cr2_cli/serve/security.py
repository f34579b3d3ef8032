"""`cr2 serve`'s security layer: who may call, and what a request may carry — before any handler runs.

- `Guard` (ASGI middleware) checks every HTTP request: the Host header must name the server (loopback names,
  the bound address, `serving.allowed_hosts`; a DNS-rebinding page gets 400), a browser Origin other than the
  server's own (or `serving.allowed_origins`) gets 403, the bearer token when one is set (401), and a POST
  must be `application/json` (415) with a declared size ≤ `serving.max_body_bytes` (413). A request that passes
  the Host, Origin and token checks is marked authenticated in its scope (the metrics count nothing else by label).
  A request carrying both Content-Length and Transfer-Encoding is answered with `Connection: close` and its
  connection closed after the answer (RFC 9112 §6.1: its framing is ambiguous, a request-smuggling vector).
  A request carrying two copies of a header that must appear once (SINGLETON_HEADERS: Host, Authorization,
  Content-Type, Origin, …) gets 400 before anything else is checked (Guard._duplicated explains why 400).
- Every value a client or an upstream supplied that an error message quotes is cut (`clip`: MAX_SHOWN_CHARS
  characters and its length), and so is every error detail as a whole (`clip_detail`), so an error answer never
  reflects a 100 KB field or header back.
- `check_exposure`: binding beyond loopback needs a bearer token (a ConfigError otherwise).
- Bodies are read bounded (`read_body`) and parsed strictly (`parse_bounded_json`: no NaN / Infinity, nesting
  ≤ MAX_JSON_DEPTH, at most MAX_JSON_VALUES values, counted before parsing starts in one linear pass:
  `json_values_exceed`); the handlers parse and check
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

from cr2.core.boundary import MAX_SHOWN_CHARS, check_texts, parse_number, printable, shown
from cr2.config import Config
from cr2.core.errors import ConfigError, InvalidValueError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
AUTHENTICATED_SCOPE_KEY = "cr2.authenticated"  # set in a request's ASGI scope once the Guard let it through
MAX_JSON_DEPTH = 64  # nesting of objects / arrays accepted in any JSON the server reads (requests, upstream answers)
# values (objects, arrays, members, elements) accepted in any JSON the server reads: a chat request or completion
# holds tens to thousands; a 1 MB body of 340,000 empty objects, or an answer of 4M keys, is refused before parsing
MAX_JSON_VALUES = 100_000
_VALUE_SCAN_BLOCK_BYTES = 1 << 18  # the value count's block: its numpy temporaries stay a few MiB for any input
MAX_DETAIL_CHARS = 300  # of an error answer's whole detail
# headers a request may carry once: which of two copies counts is what a proxy in front and this server may disagree
# on. (Two equal Content-Length values are merged by h11, as RFC 9112 §6.3 allows; two different ones, and a second
# Transfer-Encoding, are refused by h11 itself.)
SINGLETON_HEADERS = ("host", "authorization", "content-type", "content-length", "transfer-encoding", "origin",
                     "x-cr2-lambda", "x-cr2-alpha")
_LONG_WORD = re.compile(r"\S{%d,}" % (MAX_SHOWN_CHARS + 1))


def clip(value: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    """`value` as text for an error message (cr2.core.boundary.shown, unquoted): at most `limit` characters, then
    "… (N chars)" saying how long it was."""
    return shown(value, limit, quoted=False)


def clip_detail(detail: Any) -> Any:
    """An error detail with every run of more than MAX_SHOWN_CHARS non-blank characters cut (`clip`), and the whole
    cut to MAX_DETAIL_CHARS: a value quoted by a message built elsewhere (the router's "unknown benchmark '…'") is
    bounded too. Non-string details pass unchanged."""
    if not isinstance(detail, str):
        return detail
    detail = _LONG_WORD.sub(lambda m: clip(m.group()), detail)
    return clip(detail, MAX_DETAIL_CHARS)


class HttpError(Exception):
    """A request problem answered with `status` and a JSON {"detail": …} (the detail cut by `clip_detail`)."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None):
        detail = clip_detail(detail)
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


def json_values_exceed(raw: bytes, limit: int, chunk_bytes: int = _VALUE_SCAN_BLOCK_BYTES) -> bool:
    """Whether the JSON text `raw` holds more than `limit` values, decided without parsing it.

    Every value after the first is announced by a comma, a colon or an opening bracket outside strings. Counting
    those characters in the whole text (strings included) is an upper bound at C speed, enough for any ordinary
    document; only at the limit or above are the ones inside strings set aside, by `_structural_outside_strings`:
    one linear pass, so a hostile text costs milliseconds per MiB, never the seconds of building millions of
    Python objects nor those of a backtracking string scan."""
    if sum(raw.count(c) for c in (b",", b":", b"[", b"{")) < limit:
        return False
    return _structural_outside_strings(raw, limit, chunk_bytes) >= limit


def _structural_outside_strings(raw: bytes, stop_at: int, chunk_bytes: int) -> int:
    """The commas, colons and opening brackets of `raw` outside JSON strings (counting stops once it reaches
    `stop_at`), in O(len(raw)): a fixed number of numpy passes over blocks of `chunk_bytes`.

    A quote opens or closes a string unless it is escaped, that is unless the run of backslashes just before it
    is odd (a quote after two backslashes ends a string, one after a single backslash does not); a run never spans
    a quote, so its length is the distance to the last non-backslash. A byte is inside a string when an odd number
    of unescaped quotes precede it. What carries from block to block: that parity and the length of the run of
    backslashes the block ended with. (Outside strings JSON has no backslashes; in a text that has some, the count
    is exact up to the first one, where the parser stops too.)"""
    import numpy as np

    data = np.frombuffer(raw, dtype=np.uint8)
    n, in_string, run_before = 0, 0, 0
    for start in range(0, len(data), chunk_bytes):
        block = data[start : start + chunk_bytes]
        quotes = block == 0x22
        backslash = block == 0x5C
        run_after = 0
        if backslash.any():  # JSON without escapes (most of it) skips this
            index = np.arange(len(block), dtype=np.int32)
            # the last non-backslash at or before each byte; the carried run sits just before the block
            last = np.where(backslash, np.int32(-1 - run_before), index)
            np.maximum.accumulate(last, out=last)
            run = index - last  # backslashes ending at each byte (0 at any other byte)
            quotes[0] &= not run_before & 1
            quotes[1:] &= (run[:-1] & 1) == 0
            run_after = int(run[-1])
        elif run_before & 1:
            quotes[0] = False
        inside = (np.cumsum(quotes, dtype=np.int32) + in_string) & 1
        structural = (block == 0x2C) | (block == 0x3A) | (block == 0x5B) | (block == 0x7B)
        n += int(np.count_nonzero(structural & (inside == 0)))
        if n >= stop_at:
            return n
        in_string, run_before = int(inside[-1]), run_after
    return n


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
        names = [k.decode("latin-1").lower() for k, _ in scope["headers"]]
        headers = {k: v.decode("latin-1") for k, (_, v) in zip(names, scope["headers"])}
        if "content-length" in headers and "transfer-encoding" in headers:
            send = closing_send(send)
        problem = self._duplicated(names)
        if problem is not None:  # ambiguous: answered, and its connection closed
            return await send_json(closing_send(send), problem.status, {"detail": problem.detail})
        problem = self._authenticate(headers)
        if problem is None:
            scope[AUTHENTICATED_SCOPE_KEY] = True
            problem = self._check_body(scope, headers)
        if problem is not None:
            return await send_json(send, problem.status, {"detail": problem.detail}, problem.headers)
        return await self.app(scope, receive, send)

    @staticmethod
    def _duplicated(names: list[str]) -> HttpError | None:
        """400 for a request carrying two copies of a header it may carry once (SINGLETON_HEADERS), before any
        other check.

        Which copy counts is exactly what a proxy in front and this server may disagree on: with two Authorization
        headers one may check the first and the other use the last, with two Host or Content-Type headers each may
        route or parse differently (request smuggling). No copy is chosen; the request is malformed (RFC 9110 §5.3:
        these fields are singletons; RFC 9112 §3.2 requires 400 for two Host headers), not unauthenticated: a 401
        would invite a retry with "the" token although the credentials were never read."""
        seen: set[str] = set()
        for name in names:
            if name in SINGLETON_HEADERS:
                if name in seen:
                    return HttpError(400, f"the request carries more than one {name} header; send it once")
                seen.add(name)
        return None

    def _authenticate(self, headers: dict[str, str]) -> HttpError | None:
        """The Host, Origin and bearer-token checks: who may call."""
        host = headers.get("host", "")
        name = host_name(host)
        if name is None:
            return HttpError(400, f"Host {clip(printable(ascii(host)))} is not a host name with an optional port")
        if "*" not in self.hosts and name not in self.hosts:
            return HttpError(400, f"Host {clip(repr(host))} is not served here; add it to serving.allowed_hosts if it "
                                  "names this server")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                return HttpError(403, f"requests from the browser origin {clip(repr(origin))} are not allowed; add "
                                      "it to serving.allowed_origins to allow it")
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
                got = clip(repr(ctype)) if ctype else "no content type"
                return HttpError(415, f"POST bodies must be application/json, got {got}")
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                return HttpError(413, f"the request body has {clip(length)} bytes; the limit is "
                                      f"{self.max_body_bytes:,} (serving.max_body_bytes)")
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
