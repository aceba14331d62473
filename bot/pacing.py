"""Slack's pace for new messages: about one per second per channel, bursts aside."""

import asyncio
import time
from collections import defaultdict


class ChannelPacer:
    """Hands out posting turns per channel, one every ``1 / messages_per_second`` seconds.

    Turns are booked in the order they are asked for, so a burst of cards for one channel goes
    out in order while other channels go on at their own pace.
    """

    def __init__(self, messages_per_second: float) -> None:
        self._interval = 1.0 / messages_per_second
        self._next_turn: defaultdict[str, float] = defaultdict(float)

    async def wait_turn(self, channel: str) -> None:
        """Sleep until ``channel`` may take another message."""
        now = time.monotonic()
        turn = max(now, self._next_turn[channel])
        self._next_turn[channel] = turn + self._interval
        if turn > now:
            await asyncio.sleep(turn - now)

    def hold(self, channel: str, seconds: float) -> None:
        """Slack asked us to wait (429 Retry-After): no new turn before then."""
        self._next_turn[channel] = max(self._next_turn[channel], time.monotonic() + seconds)
