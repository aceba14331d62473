"""What reviewers look at, kept current: their App Home and their ``/accessgate pending`` list.

A review changing (filed, decided from any door) changes both for each linked reviewer of it.
Refreshes are requested by the notifier as it delivers the review's events; requests for one
person are merged while they wait, and refreshes are paced, so a burst of decisions costs each
reviewer one refresh per turn, not one per decision. A pending list is replaced through the
response_url it was shown with, while Slack still takes it (``models.chat.pending_lists``).

Refreshes are not kept in the outbox: one lost to a restart is made good the next time the
person opens the App Home (``app_home_opened`` publishes afresh) or asks for the list.
"""

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from sqlmodel import Session

from bot import blocks
from bot.database import Database
from models.chat.cards import ReviewCardFacts, review_card_facts
from models.chat.links import user_by_chat_id
from models.chat.pending_lists import take_pending_list_url
from models.core.clock import utc_now
from models.reviews.listing import reviews_waiting_on
from models.users.schema import User

logger = logging.getLogger("accessgate.bot.views")

# views.publish is in Slack's tier 4 (100+ calls a minute); one refresh a second leaves room for
# the publishes answering app_home_opened.
REFRESHES_PER_SECOND = 1.0


def waiting_on(db: Session, reviewer: User, api_base_url: str) -> list[ReviewCardFacts]:
    """The reviews waiting on ``reviewer``, as cards show them; one more than a list shows, at
    most, so the list can say there are more."""
    ids = reviews_waiting_on(db=db, reviewer=reviewer, limit=blocks.PENDING_LIST_LIMIT + 1)
    found = (
        review_card_facts(db=db, review_id=review_id, api_base_url=api_base_url)
        for review_id in ids
    )
    return [facts for facts in found if facts is not None]


def pending_summary(facts: list[ReviewCardFacts]) -> str:
    """The notification text of a pending list."""
    return f"{len(facts)} review(s) waiting on you"


@dataclass(frozen=True)
class ReviewerViews:
    """One person's views as they should look now."""

    linked: bool
    waiting: list[ReviewCardFacts]
    pending_list_url: str | None  # where their pending list can be replaced, if anywhere
    reminders_by_dm: bool = False

    @property
    def home(self) -> dict[str, Any]:
        return blocks.home_view(
            self.waiting, linked=self.linked, reminders_by_dm=self.reminders_by_dm
        )


def read_views(
    db: Session, chat_id: str, api_base_url: str, *, pending_list: bool = False
) -> ReviewerViews:
    """What one Slack user's views show; with ``pending_list``, take a use of its URL too."""
    user = user_by_chat_id(db=db, chat_id=chat_id)
    if user is None:
        return ReviewerViews(linked=False, waiting=[], pending_list_url=None)
    url = take_pending_list_url(db=db, chat_id=chat_id, now=utc_now()) if pending_list else None
    return ReviewerViews(
        linked=True,
        waiting=waiting_on(db, user, api_base_url),
        pending_list_url=url,
        reminders_by_dm=user.reminders_by_dm,
    )


class ViewRefresher:
    """Refreshes the views of the people asked for, merged per person and paced."""

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
        """What these people look at may have changed (loop thread)."""
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
                await self._refresh(chat_id)
                await asyncio.sleep(1.0 / REFRESHES_PER_SECOND)

    async def _refresh(self, chat_id: str) -> None:
        try:
            views = await self._database.run(
                lambda db: read_views(db, chat_id, self._api_base_url, pending_list=True)
            )
            await self._client.views_publish(user_id=chat_id, view=views.home)
            if views.pending_list_url is not None:
                await replace_pending_list(views.pending_list_url, views.waiting)
        except SlackApiError as exc:
            logger.warning("App Home of %s not refreshed: %s", chat_id, exc.response.get("error"))
        except Exception:  # one person's views must not stop the others'
            logger.exception("views of %s not refreshed", chat_id)


async def replace_pending_list(response_url: str, waiting: list[ReviewCardFacts]) -> None:
    """Replace a pending list the person sees with ``waiting``; Slack may have let the URL go."""
    answer = await AsyncWebhookClient(response_url).send(
        text=pending_summary(waiting), blocks=blocks.pending_blocks(waiting), replace_original=True
    )
    if answer.status_code != 200:
        logger.info("a pending list was not replaced (%s)", answer.status_code)
