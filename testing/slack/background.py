"""Running ASGI apps and coroutines in background threads, so tests can stay synchronous."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Self

import uvicorn
from starlette.types import ASGIApp

from testing.slack.records import T

JSONDict = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Running ASGI apps and coroutines in background threads


class LoopThread:
    """An asyncio event loop running forever in a daemon thread; coroutines are handed to it."""

    def __init__(self, name: str = "loop-thread") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> Self:
        self.thread.start()
        return self

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop (from any thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
        """Run ``coro`` on the loop and wait for its result (not from the loop's own thread)."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking call from the loop's own thread would deadlock")
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what is still running, shut the loop down and close it."""
        if self.loop.is_closed():
            return
        if self.thread.is_alive():
            self.submit(self._drain(timeout)).result(timeout + 5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)
        self.loop.close()

    async def _drain(self, timeout: float) -> None:
        current = asyncio.current_task()
        tasks = [task for task in asyncio.all_tasks() if task is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        await self.loop.shutdown_asyncgens()
        await self.loop.shutdown_default_executor()


class BackgroundServer:
    """Serves an ASGI app with uvicorn on 127.0.0.1 and a free port, from its own loop thread."""

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", name: str = "asgi") -> None:
        self.app = app
        self.host = host
        self.port = 0
        self.loop_thread = LoopThread(f"{name}-loop")
        self._server: uvicorn.Server | None = None
        self._serving: Future[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.loop_thread.loop

    def start(self, timeout: float = 10.0) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((self.host, 0))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            lifespan="on",
            log_level="warning",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        server = self._server = uvicorn.Server(config)
        self.loop_thread.start()
        serving = self._serving = self.loop_thread.submit(server.serve(sockets=[sock]))
        deadline = time.monotonic() + timeout
        while not server.started:
            if serving.done() or time.monotonic() > deadline:
                sock.close()
                try:
                    self.stop()
                except Exception as error:
                    raise RuntimeError(f"uvicorn did not start on {self.url}") from error
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        server, serving = self._server, self._serving
        self._server = self._serving = None
        try:
            if server is not None and serving is not None and self.loop_thread.thread.is_alive():
                server.should_exit = True
                serving.result(timeout=15)
        finally:
            self.loop_thread.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
