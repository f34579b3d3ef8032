"""`cr2 serve`'s uvicorn side: a socket bound before anything says "serving", h11 with header- and body-read
timeouts, a cap on the pieces a body may arrive in and a write-progress deadline, and log lines that cannot drive a
terminal nor flood the log."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from cr2.core.errors import ConfigError

log = logging.getLogger("cr2_cli.serve")


def bind_socket(host: str, port: int):
    """A listening-ready socket bound to (host, port), or a ConfigError naming the port (in use, not permitted)
    before anything says the server is serving."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does; a listening port still refuses
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; another process may use the port "
                          "(pick another with --port) or the address is not this machine's") from None
    sock.set_inheritable(True)
    return sock


BODY_TIMEOUT_SCOPE_KEY = "cr2.body_timeout"  # set in a request's ASGI scope when its body read timed out
BODY_CHUNKS_SCOPE_KEY = "cr2.body_chunks"  # set in a request's ASGI scope when its body came in too many pieces
# a request body may arrive in at most one piece (a read of a Content-Length body, a chunk of a chunked one) per
# BODY_BYTES_PER_CHUNK bytes of serving.max_body_bytes, and never fewer than MIN_BODY_CHUNKS: 4,096 for the default
# 1 MiB. Each piece costs the event loop a parse and an ASGI message whatever its size; a client on a slow link
# sends ~1,400-byte segments, well within the cap.
BODY_BYTES_PER_CHUNK = 256
MIN_BODY_CHUNKS = 64


LINGER_S = 2.0  # after answering before the body was read: how long the rest of the body is discarded, at most


def max_body_chunks(max_body_bytes: int) -> int:
    """The most pieces a request body of at most `max_body_bytes` may arrive in (BODY_BYTES_PER_CHUNK)."""
    return max(MIN_BODY_CHUNKS, max_body_bytes // BODY_BYTES_PER_CHUNK)


def header_timeout_protocol(header_timeout_s: float, body_timeout_s: float = 10.0, min_body_rate_bps: float = 1024.0,
                            write_timeout_s: float = 10.0, body_chunks: int | None = None):
    """uvicorn's h11 protocol with read timeouts and a write-progress deadline, so slow clients cannot hold
    connections (or, through a streamed answer, concurrency slots) open:

    - headers: a connection that has not delivered a request's headers within `header_timeout_s` of opening (or
      of the previous response) is closed;
    - body: once the headers are in, the body must arrive within `body_timeout_s` plus 1 / `min_body_rate_bps`
      s per byte received (Apache's mod_reqtimeout rule); a body that falls behind is answered 408 and the
      connection closed, and the request is marked in its scope (BODY_TIMEOUT_SCOPE_KEY) for the metrics;
    - pieces: a body that arrives in more than `body_chunks` pieces (h11 Data events: a read of a Content-Length
      body, a chunk of a chunked one; None: no cap) is answered 413 and the connection closed — a 1 MiB body sent
      one byte per packet would otherwise cost the event loop a million parses and ASGI messages; the request is
      marked in its scope (BODY_CHUNKS_SCOPE_KEY);
    - a response sent before the body was read (a refusal: 401, 413, …) closes the connection instead of
      reading the rest of a body nobody will use — a lingering close: the answer is flushed and the write side
      shut first, then what the client still sends is discarded for at most LINGER_S before the socket closes, so
      the client reads the refusal instead of a connection reset (closing a socket with unread input sends RST,
      which makes the client's kernel drop the answer it had not read yet);
    - writes: when the answer fills the connection's send buffer (the client reads slower than it is sent, or not
      at all), the client must drain it within `write_timeout_s`, each time it fills; otherwise the connection is
      aborted (its buffer dropped). The request sees a disconnect, so a streamed answer ends and gives back its
      concurrency slot instead of waiting on a reader that never comes."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11Protocol(H11Protocol):
        _header_timer = None
        _body_timer = None
        _write_timer = None
        _body_started = 0.0
        _body_bytes = 0
        _body_chunks = 0
        _too_many_chunks = False
        _linger_timer = None
        _lingering = False

        def _count_body_chunks(self) -> None:
            """Count the Data events h11 hands uvicorn for each request; past `body_chunks`, hand none on (uvicorn
            then waits for data, and data_received answers 413)."""
            next_event = self.conn.next_event

            def counted():
                if self._too_many_chunks:
                    return h11.NEED_DATA
                event = next_event()
                if type(event) is h11.Request:
                    self._body_chunks = 0
                elif type(event) is h11.Data:
                    self._body_chunks += 1
                    if body_chunks is not None and self._body_chunks > body_chunks:
                        self._too_many_chunks = True
                        return h11.NEED_DATA
                return event

            self.conn.next_event = counted

        def _refuse_body(self, status: bytes, detail: bytes, scope_key: str) -> None:
            """Answer `status` (unless the app already answered), mark the request's scope, close the connection."""
            cycle = self.cycle
            if cycle is not None:
                cycle.scope[scope_key] = True
                if not cycle.response_started:
                    body = b'{"detail":"' + detail + b'"}'
                    self.transport.write(b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
                                         b"connection: close\r\ncontent-length: " + str(len(body)).encode() +
                                         b"\r\n\r\n" + body)
                    cycle.response_started = cycle.response_complete = True
            self._close_lingering()

        def _close_lingering(self) -> None:
            """Flush the answer and shut the write side, discard what the client still sends, and close the socket
            after LINGER_S (or when the client closes first)."""
            if self._lingering or self.transport.is_closing():
                return
            self._lingering = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self._linger_timer = self.loop.call_later(LINGER_S, self.transport.close)

        def _body_pending(self) -> bool:
            return self.conn.their_state is h11.SEND_BODY

        def _body_deadline(self) -> float:
            return self._body_started + body_timeout_s + self._body_bytes / min_body_rate_bps

        def _arm_body_timer(self) -> None:
            self._cancel_timer("_body_timer")
            self._body_timer = self.loop.call_later(max(0.0, self._body_deadline() - time.monotonic()),
                                                    self._body_timeout)

        def _cancel_timer(self, name: str) -> None:
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def _body_timeout(self) -> None:
            self._body_timer = None
            if not self._body_pending() or self.transport.is_closing():
                return
            if time.monotonic() < self._body_deadline():  # bytes arrived since the timer was set: it moved the deadline
                return self._arm_body_timer()
            log.info("closed a connection whose request body arrived slower than %g bytes/s (%d bytes in %.1f s)",
                     min_body_rate_bps, self._body_bytes, time.monotonic() - self._body_started)
            self._refuse_body(b"408 Request Timeout",
                              b"the request body arrived too slowly (serving.body_timeout_s, min_body_rate_bps)",
                              BODY_TIMEOUT_SCOPE_KEY)

        def pause_writing(self) -> None:  # the transport's buffer is full: the client must make progress
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(write_timeout_s, self._write_timeout)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._cancel_timer("_write_timer")

        def _write_timeout(self) -> None:
            self._write_timer = None
            if not self.flow.write_paused:
                return
            log.info("closed a connection whose client read nothing of its answer for %g s (serving.write_timeout_s)",
                     write_timeout_s)
            self.transport.abort()  # close() would first wait to flush the buffer the client does not read

        def _arm_header_timer(self) -> None:
            self._cancel_timer("_header_timer")
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _header_timeout(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                log.info("closed a connection that sent no complete request headers within %g s", header_timeout_s)
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._count_body_chunks()
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            if self._lingering:  # the rest of a refused body: discarded
                return
            was_pending = self._body_pending()
            super().data_received(data)
            if self._too_many_chunks:
                if not self.transport.is_closing():
                    log.info("closed a connection whose request body arrived in more than %d pieces", body_chunks)
                    self._cancel_timer("_body_timer")
                    self._refuse_body(b"413 Content Too Large",
                                      b"the request body arrived in more than %d pieces (one per %d bytes of "
                                      b"serving.max_body_bytes); send it in larger writes"
                                      % (body_chunks, BODY_BYTES_PER_CHUNK), BODY_CHUNKS_SCOPE_KEY)
                return
            if self.conn.their_state is not h11.IDLE:  # the request's headers are in
                self._cancel_timer("_header_timer")
            if self._body_pending():
                if not was_pending:  # a new request's body starts: its clock starts with the headers
                    self._body_started, self._body_bytes = time.monotonic(), 0
                    self._arm_body_timer()
                else:
                    self._body_bytes += len(data)
            else:
                self._cancel_timer("_body_timer")

        def on_response_complete(self) -> None:
            if self._body_pending() and not self.transport.is_closing():  # answered before its body was read
                self._cancel_timer("_body_timer")
                self._close_lingering()
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:  # the next request's headers
                self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._cancel_timer("_header_timer")
            self._cancel_timer("_body_timer")
            self._cancel_timer("_write_timer")
            self._cancel_timer("_linger_timer")
            super().connection_lost(exc)
            self.flow.resume_writing()  # a send waiting for the buffer to drain returns (the cycle is disconnected)

    return HeaderTimeoutH11Protocol


LOG_BURST = 10  # log lines of one kind (one message template of one logger) passed per LOG_INTERVAL_S
LOG_INTERVAL_S = 10.0


class RateLimitedLog(logging.Filter):
    """Passes at most `burst` records of each kind (logger and message template) per `interval_s`; the first record
    of a kind after its interval says how many of that kind were dropped ("… (K similar lines suppressed in the
    last N s)"). Attached to the server's loggers: any client can make a request the server logs (a malformed one,
    a body too slow, a disconnect), and without it each adds a line — a flood of them fills the disk and buries the
    lines that matter. Thread-safe."""

    MAX_KINDS = 1024  # message templates tracked; beyond (never, with templated messages) the counts start over

    def __init__(self, burst: int = LOG_BURST, interval_s: float = LOG_INTERVAL_S):
        super().__init__()
        self.burst, self.interval_s = burst, interval_s
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str], list] = {}  # kind → [window start (monotonic s), passed, suppressed]

    def reset(self) -> None:
        """Forget every window (a new server, a test)."""
        with self._lock:
            self._kinds.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.msg if isinstance(record.msg, str) else type(record.msg).__name__)
        now = time.monotonic()
        with self._lock:
            window = self._kinds.get(kind)
            if window is None or now - window[0] >= self.interval_s:
                suppressed = window[2] if window is not None else 0
                if len(self._kinds) >= self.MAX_KINDS:
                    self._kinds.clear()
                self._kinds[kind] = [now, 1, 0]
            elif window[1] < self.burst:
                window[1] += 1
                return True
            else:
                window[2] += 1
                return False
        if suppressed:
            record.msg = (f"{record.getMessage()} ({suppressed:,} similar lines suppressed in the last "
                          f"{self.interval_s:g} s)")
            record.args = None
        return True


RATE_LIMITED_LOG = RateLimitedLog()


def rate_limit_logs(names: tuple[str, ...] = ("uvicorn.error", "uvicorn.access", "cr2_cli.serve")) -> None:
    """Attach RATE_LIMITED_LOG to the server's loggers (idempotent): it sees each record once, where it is logged."""
    for name in names:
        logger = logging.getLogger(name)
        if RATE_LIMITED_LOG not in logger.filters:
            logger.addFilter(RATE_LIMITED_LOG)


class PrintableLog(logging.Filter):
    """Log records with terminal control characters removed (cr2.core.boundary.printable): a request path, header or
    query logged by uvicorn or cr2 cannot retitle, clear or recolour the operator's terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        from cr2.core.boundary import printable

        message = record.getMessage()
        clean = printable(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_PRINTABLE = PrintableLog()


def printable_logs(names: tuple[str, ...] = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "cr2_cli.serve")) -> None:
    """Attach PrintableLog to every handler of the server's loggers (idempotent)."""
    for name in names:
        for handler in logging.getLogger(name).handlers:
            if _PRINTABLE not in handler.filters:
                handler.addFilter(_PRINTABLE)


def server_config(app: Any, serving: Any, host: str = "127.0.0.1", port: int = 8080, **kwargs: Any):
    """The uvicorn configuration `cr2 serve` runs with (h11 with header- and body-read timeouts, a cap on a body's
    pieces and a write-progress deadline; printable, rate-limited logs)."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port,
                            http=header_timeout_protocol(serving.header_timeout_s, serving.body_timeout_s,
                                                         serving.min_body_rate_bps, serving.write_timeout_s,
                                                         max_body_chunks(serving.max_body_bytes)),
                            log_level=kwargs.pop("log_level", "warning"), **kwargs)
    printable_logs()  # uvicorn.Config has configured its handlers by now
    rate_limit_logs()
    RATE_LIMITED_LOG.reset()  # a new server starts with fresh windows
    return config