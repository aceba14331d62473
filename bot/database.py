"""The bot's way into the domain services, which are synchronous: one worker thread per call."""

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Engine
from sqlmodel import Session

from models.core.db import db_scope

Result = TypeVar("Result")

# Enough for the notifier's deliveries and a burst of clicks; the API has threads of its own.
WORKER_THREADS = 16


class Database:
    """Runs a unit of work in a database session of its own, off the event loop."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="chat-db")

    async def run(self, work: Callable[[Session], Result]) -> Result:
        """Run ``work(db)`` in a worker thread; the database session closes when it returns."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._run, work)

    def _run(self, work: Callable[[Session], Result]) -> Result:
        with db_scope(self.engine) as db:
            return work(db)

    def close(self) -> None:
        """Stop the worker threads once their current work is done."""
        self._executor.shutdown(wait=True)
