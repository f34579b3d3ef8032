"""`cr2 serve`'s uvicorn side: a socket bound before anything says "serving", and h11 with a header-read timeout."""
from __future__ import annotations

import logging
from typing import Any

from cr2.errors import ConfigError

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


def header_timeout_protocol(header_timeout_s: float):
    """uvicorn's h11 protocol with a header-read timeout: a connection that has not delivered a request's
    headers within `header_timeout_s` of opening (or of the previous response) is closed (slow-header clients
    cannot hold connections open)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11Protocol(H11Protocol):
        _header_timer = None

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timeout(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                log.info("closed a connection that sent no complete request headers within %g s", header_timeout_s)
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the request's headers are in
                self._cancel_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:  # the next request's headers
                self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

    return HeaderTimeoutH11Protocol


def server_config(app: Any, serving: Any, host: str = "127.0.0.1", port: int = 8080, **kwargs: Any):
    """The uvicorn configuration `cr2 serve` runs with (h11 with the header-read timeout)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, http=header_timeout_protocol(serving.header_timeout_s),
                          log_level=kwargs.pop("log_level", "warning"), **kwargs)