"""Slack's pace for new messages, the same for every replica: about one per second per channel.

Turns come from the schedule in the database (``models.chat.pace``), so three replicas posting
to one channel take turns instead of each posting at Slack's full rate. A post also waits until
the one before was answered an interval ago, whichever replica made it, so a post that went
out late (or is still on its way) never brings the next one closer than Slack allows. A
turn further away than the horizon is not waited for in memory: ``NotYourTurn`` sends the
message's event back to the outbox until about when its turn comes.
"""

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.database import Database
from bot.slack_api import POST_TIMEOUT_SECONDS
from models.chat.pace import book_turn, hold_turns, record_answer, start_call

logger = logging.getLogger("accessgate.bot.pacing")

# A hair over Slack's interval, for clocks of different machines that disagree a little.
MARGIN_SECONDS = 0.02
# A call started this long ago without an answer was abandoned (its caller died): longer than
# any post takes, the poster's timeout included.
CALL_ABANDONED_AFTER_SECONDS = POST_TIMEOUT_SECONDS + 5


class NotYourTurn(Exception):
    """The message's turn in Slack's pace is ``seconds`` away: come back then."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"next turn in {seconds:.1f} s")
        self.seconds = seconds


class SlackPace:
    """This process's view of the cluster's shared schedule of turns."""

    def __init__(self, database: Database, messages_per_second: float) -> None:
        self._database = database
        self._interval = 1.0 / messages_per_second + MARGIN_SECONDS
        self._posting: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    @asynccontextmanager
    async def turn(self, key: str, *, horizon: float) -> AsyncIterator[None]:
        """Wait for a turn of ``key`` booked now, then run the block (the call to Slack).

        Raises NotYourTurn if no turn is within ``horizon`` seconds (the booked place in line
        says when to come back).
        """
        booked_at = time.time()
        turn = await self._database.run(
            lambda db: book_turn(
                db=db,
                key=key,
                now=booked_at,
                interval=self._interval,
                horizon=horizon,
            )
        )
        if not turn.booked:
            raise NotYourTurn(turn.wait)
        turn_at = booked_at + turn.wait  # the booking's clock, not after the trip back
        async with self._posting[key]:  # this process's posts to a key go one at a time
            await _sleep_until(turn_at)
            # The call before this turn may have gone out late, or be on its way still: wait
            # until it was answered an interval ago, whichever replica made it.
            await self._start_call(key)
            try:
                yield
            finally:
                await asyncio.shield(self._record_answer(key, time.time()))

    async def _start_call(self, key: str) -> None:
        """Take the moment of this call; NotYourTurn if the previous one takes too long."""
        deadline = time.time() + CALL_ABANDONED_AFTER_SECONDS
        while time.time() < deadline:
            wait = await self._database.run(
                lambda db: start_call(
                    db=db,
                    key=key,
                    now=time.time(),
                    interval=self._interval,
                    abandoned_after=CALL_ABANDONED_AFTER_SECONDS,
                )
            )
            if wait == 0:
                return
            await asyncio.sleep(wait)
        raise NotYourTurn(self._interval)

    async def _record_answer(self, key: str, at: float) -> None:
        try:
            await self._database.run(lambda db: record_answer(db=db, key=key, at=at))
        except Exception:
            logger.exception("could not record Slack's answer for %s", key)

    async def hold(self, key: str, seconds: float) -> None:
        """Slack asked to wait (429 Retry-After): no replica takes a turn of ``key`` before."""
        until = time.time() + seconds
        await self._database.run(lambda db: hold_turns(db=db, key=key, until=until))


async def _sleep_until(moment: float) -> None:
    """Sleep until ``moment`` (seconds since the epoch), if it is still ahead."""
    wait = moment - time.time()
    if wait > 0:
        await asyncio.sleep(wait)
