"""Serving the app with uvicorn, hardened for clients on an open network.

Two things uvicorn does not do by itself:

- **Cut off slow headers.** Uvicorn waits for a request's headers as long as the client keeps
  the connection open (its keep-alive timeout only runs *between* requests, and not before the
  first). A client sending a header byte a second would hold a connection indefinitely; here,
  headers not complete ``header_timeout`` seconds after the connection opened (or after the
  previous answer) close the connection. Slow *bodies* are ``api.request_limits``'s.
- **Keep sign-in codes out of the access log.** The identity provider sends the browser back
  with ``code`` and ``state`` in the query string; the access log writes query values of such
  parameters as ``…``.
"""

import asyncio
import logging
import re
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.logs import configure_logging

SENSITIVE_QUERY_PARAMETERS = re.compile(
    r"([?&](?:code|state|token|access_token|id_token|session_state)=)[^&\s]*", re.IGNORECASE
)


def serve(
    app: FastAPI,
    *,
    host: str,
    port: int,
    log_level: str,
    header_timeout: float,
    log_format: str = "text",
) -> None:
    """Run ``app`` until interrupted, as ``accessgate serve`` does."""
    configure_logging(log_format, log_level)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None,  # configure_logging's: every logger through one formatter
        http=protocol_with_header_timeout(header_timeout),
    )
    logging.getLogger("uvicorn.access").addFilter(redact_sensitive_query)
    uvicorn.Server(config).run()


def protocol_with_header_timeout(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol, closing connections whose headers arrive too slowly."""

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()

        def on_headers_complete(self) -> None:
            self._stop_waiting()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._await_headers()  # of the next request on this connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            self._stop_waiting()
            if not self.transport.is_closing():
                self._header_timer = self.loop.call_later(seconds, self._headers_too_slow)

        def _stop_waiting(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()

    return HeaderTimeoutProtocol


def redact_sensitive_query(record: logging.LogRecord) -> bool:
    """Access-log filter: the values of sign-in query parameters become ``…``."""
    args: Any = record.args
    if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
        path = SENSITIVE_QUERY_PARAMETERS.sub(r"\1…", args[2])
        record.args = (*args[:2], path, *args[3:])
    return True
