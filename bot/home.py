"""The App Home: what it shows a person, and keeping it current after every change of a review.

A review changing (filed, decided from any door) changes the App Home of each linked reviewer
of it. Refreshes are requested by the notifier as it delivers the review's events; requests for
one person are merged while they wait, and ``views.publish`` is paced, so a burst of decisions
costs each reviewer one publish per turn, not one per decision.

Refreshes are not kept in the outbox: one lost to a restart is made good the next time the
person opens the App Home (``app_home_opened`` publishes afresh).
"""

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlmodel import Session

from bot import blocks
from bot.database import Database
from models.chat.cards import ReviewCardFacts, review_card_facts
from models.chat.links import user_by_chat_id
from models.reviews.service import reviews_waiting_on
from models.users.schema import User

logger = logging.getLogger("accessgate.bot.home")

PENDING_SHOWN = 15
# views.publish is in Slack's tier 4 (100+ calls a minute); one a second leaves room for the
# publishes answering app_home_opened.
PUBLISHES_PER_SECOND = 1.0


def waiting_on(db: Session, reviewer: User, api_base_url: str) -> list[ReviewCardFacts]:
    """The reviews waiting on ``reviewer``, as cards show them; one more than shown at most."""
    ids = reviews_waiting_on(db=db, reviewer=reviewer, limit=PENDING_SHOWN + 1)
    found = (
        review_card_facts(db=db, review_id=review_id, api_base_url=api_base_url)
        for review_id in ids
    )
    return [facts for facts in found if facts is not None]


def home_view_for(db: Session, chat_id: str, api_base_url: str) -> dict[str, Any]:
    """The App Home of one Slack user: their waiting reviews, or how to link their account."""
    user = user_by_chat_id(db=db, chat_id=chat_id)
    if user is None:
        return blocks.home_view([], linked=False)
    return blocks.home_view(waiting_on(db, user, api_base_url), linked=True)


class HomeRefresher:
    """Publishes fresh App Homes for the people asked for, merged per person and paced."""

    def __init__(self, *, database: Database, client: AsyncWebClient, api_base_url: str) -> None:
        self._database = database
        self._client = client
        self._api_base_url = api_base_url
        self._waiting: dict[str, None] = {}  # chat ids in the order asked, each once
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start publishing in the background."""
        self._task = asyncio.create_task(self._publish_forever(), name="chat-home-refresher")

    async def stop(self) -> None:
        """Stop; refreshes still waiting are dropped (the next app_home_opened makes them)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def request(self, chat_ids: Iterable[str]) -> None:
        """These people's App Home may have changed (loop thread)."""
        for chat_id in chat_ids:
            self._waiting[chat_id] = None
        if self._waiting:
            self._wake.set()

    async def _publish_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._waiting:
                chat_id = next(iter(self._waiting))
                del self._waiting[chat_id]  # a request arriving from now on publishes again
                await self._publish(chat_id)
                await asyncio.sleep(1.0 / PUBLISHES_PER_SECOND)

    async def _publish(self, chat_id: str) -> None:
        try:
            view = await self._database.run(
                lambda db: home_view_for(db, chat_id, self._api_base_url)
            )
            await self._client.views_publish(user_id=chat_id, view=view)
        except SlackApiError as exc:
            logger.warning("App Home of %s not refreshed: %s", chat_id, exc.response.get("error"))
        except Exception:  # one person's App Home must not stop the others'
            logger.exception("App Home of %s not refreshed", chat_id)
