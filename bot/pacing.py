"""Slack's pace for new messages: about one per second per channel, bursts aside."""

import asyncio
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ChannelPacer:
    """Lets one new message at a time into a channel, ``1 / messages_per_second`` apart.

    The gap is counted from when Slack answered the previous post, not from when it was sent,
    so a slow answer cannot bunch two posts together on Slack's side. Channels do not wait for
    each other.
    """

    def __init__(self, messages_per_second: float) -> None:
        self._interval = 1.0 / messages_per_second
        self._next_turn: defaultdict[str, float] = defaultdict(float)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    @asynccontextmanager
    async def turn(self, channel: str) -> AsyncIterator[None]:
        """Wait for ``channel``'s turn; the post happens inside the block."""
        async with self._locks[channel]:
            delay = self._next_turn[channel] - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                yield
            finally:
                self._next_turn[channel] = max(
                    self._next_turn[channel], time.monotonic() + self._interval
                )

    def wait_time(self, channel: str) -> float:
        """Seconds until ``channel`` could take a message (a post in progress counts as busy)."""
        wait = self._next_turn[channel] - time.monotonic()
        if self._locks[channel].locked():
            wait = max(wait, self._interval)
        return max(wait, 0.0)

    def book(self, channel: str) -> float:
        """Book ``channel``'s next turn without waiting; return the seconds until it comes."""
        now = time.monotonic()
        turn = max(now, self._next_turn[channel])
        self._next_turn[channel] = turn + self._interval
        return turn - now

    def hold(self, channel: str, seconds: float) -> None:
        """Slack asked us to wait (429 Retry-After): no new turn before then."""
        self._next_turn[channel] = max(self._next_turn[channel], time.monotonic() + seconds)
