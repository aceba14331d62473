"""Webhook receivers on loopback for the tests and the benchmark: real HTTP servers that record
what they were sent and answer as told."""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: str
    at: float


class Receiver:
    """Records every POST; ``answer(n)`` (n counts from 1) returns (status, seconds to wait
    before answering); a wait past the sender's timeout is a timeout."""

    def __init__(self, answer: Callable[[int], tuple[int, float]] | None = None) -> None:
        self.received: list[Received] = []
        self._answer = answer or (lambda _n: (204, 0.0))
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver._lock:
                    receiver.received.append(
                        Received(
                            {k.lower(): v for k, v in self.headers.items()},
                            body.decode(),
                            time.monotonic(),
                        )
                    )
                    number = len(receiver.received)
                status, wait = receiver._answer(number)
                time.sleep(wait)
                try:
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up waiting

            def log_message(self, *_args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def __enter__(self) -> "Receiver":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.received)
