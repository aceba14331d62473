"""The outbox's deliverer to Slack: cards for new reviews, rewrites on every change, DMs.

For each event, oldest first per review (``models.delivery.leases`` keeps that rule):

- ``review.created``: post a card to every channel of the review's connection, and to the
  default channel. Each posted card's channel and ts are stored before anything else happens,
  so a retry posts only the cards still missing.
- ``review.updated``: rewrite every stored card of the review with its current state; on a
  final decision (approved, rejected, revoked) queue a ``chat.direct_message`` event in the
  transaction that marks this one delivered.
- after either, the App Home and pending list of every linked reviewer of the review are
  refreshed (``bot.fresh_views``).
- ``review.reminder`` (the scheduler's): a reply in the thread of each card of a review still
  pending, mentioning the linked reviewers of the groups still undecided (not those who take a
  digest instead).
- ``review.access_ended`` (the scheduler's): rewrite the cards of a JIT grant whose access
  ended, and queue the requester's DM saying so.
- ``chat.direct_message``: DM the requester, at the pace of their DM channel. These go in a lane
  of their own (own order, own slots): fifty decisions for one requester wait for their turns
  in the outbox, not in front of anybody's cards. ``chat.reminder_digest`` shares that lane:
  one DM to a reviewer listing every review waiting on them.

Every new message takes a turn in Slack's pace from the schedule all replicas share
(``bot.pacing``), then claims its delivery key (``models.chat.messages``) just before the post,
so no replica posts a message another posted or is posting. A post whose answer never came may
have landed: the next attempt looks for it in the channel (by the delivery key in the message's
metadata) and adopts it instead of posting a second card.

A card is always rendered from the review as it is now, so the order cards and decisions meet
in does not matter. A delivery Slack cannot take now (429 beyond the client's own retries, 5xx,
a lost connection) is postponed with backoff in the outbox; what Slack will never take (a
channel that does not exist, blocks it refuses) is written down on the event and skipped.
"""

import asyncio
import contextlib
import dataclasses
import functools
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from sqlmodel import Session

from bot.blocks import (
    access_ended_dm,
    decision_dm,
    digest_dm,
    reminder_text,
    review_card,
    review_card_text,
)
from bot.database import Database
from bot.fresh_views import ViewRefresher, waiting_on
from bot.pacing import NotYourTurn, SlackPace
from bot.slack_api import is_token_refusal
from models.chat.cards import (
    ReviewCardFacts,
    linked_reviewers,
    mentioned_reviewers,
    review_card_facts,
)
from models.chat.channel_health import record_failure
from models.chat.messages import (
    CARD_KINDS,
    DIRECT_MESSAGE_KINDS,
    ChatMessage,
    ChatMessageKind,
    Claim,
    card_channels,
    card_key,
    claim_delivery,
    delivered_keys,
    direct_message_key,
    posted_messages,
    release_claim,
    remember_message,
    reminder_key,
)
from models.chat.pace import wait_time
from models.core.clock import utc_now
from models.delivery.leases import (
    ACCESS_ENDED,
    DECISION,
    LeasedEvent,
    lease_deliverable_events,
    mark_delivered,
    postpone,
    release_leases,
    renew_lease,
    reschedule,
)
from models.delivery.outbox import EventKind
from models.reviews.machine import ReviewStatus
from models.users.schema import User

logger = logging.getLogger("accessgate.bot.notifier")

# Cards and direct messages have slots of their own, so a requester's DMs waiting for their
# turn never hold back anyone's cards.
CARD_SLOTS = 200
DM_SLOTS = 50
# Events leased per query: a short write, however long the backlog (more follow at once).
LEASE_BATCH = 50
# How far ahead a direct message books its turn: a requester with fifty decisions to hear of
# waits in the outbox, not in the DM lane's slots.
DM_HORIZON_SECONDS = 1.5
# Cards book up to this far ahead (and never beyond half a lease, so a turn comes while the
# deliverer still holds the event): further back in a long queue, they wait in the outbox.
CARD_HORIZON_SECONDS = 10.0
# A rate-limited method waits for the whole cluster under this key (see ``bot.pacing``).
UPDATE_PACE = "method:chat.update"
# Card metadata carries the delivery key, so an uncertain post can be found in the channel.
METADATA_EVENT_TYPE = "accessgate_card"
# How far back in a channel to look for a card whose post may have landed.
RECHECK_MARGIN = timedelta(minutes=1)
HISTORY_UNREADABLE = frozenset({"missing_scope", "not_in_channel", "channel_not_found"})
POLL_SECONDS = 1.0  # other processes' events; this process's own wake the notifier at once
FIRST_RETRY_SECONDS = 2.0
CLAIMED_ELSEWHERE_RETRY_SECONDS = 5.0  # another deliverer is posting that very message
MAX_RETRY_SECONDS = 300.0
# Events the bot reaches this late (say the chat plugin was configured long after) describe
# reviews nobody is waiting on in the channel any more; posting them would flood it.
STALE_AFTER = timedelta(days=1)
FINAL_DECISIONS = frozenset({ReviewStatus.APPROVED, ReviewStatus.REJECTED, ReviewStatus.REVOKED})
# Slack errors about one message that no retry can fix.
PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_blocks",
        "invalid_blocks_format",
        "msg_too_long",
        "no_text",
        "message_not_found",
        "cant_update_message",
        "edit_window_closed",
        "user_not_found",
        "cannot_dm_bot",
        "restricted_action",
        "missing_scope",
        "msg_blocks_too_long",
        "user_disabled",
        "user_not_visible",
        "invalid_arguments",
    }
)
# Every restricted_action_* variant (read-only channel, thread-only channel, ...) is one too.
PERMANENT_ERROR_PREFIXES = ("restricted_action",)


def is_permanent(exc: SlackApiError) -> bool:
    """Slack will never take this message as it is: retrying would only hold the queue up."""
    error = str(exc.response.get("error") or "") if exc.response is not None else ""
    return error in PERMANENT_ERRORS or error.startswith(PERMANENT_ERROR_PREFIXES)


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt: exponential, capped, with jitter so many events
    postponed together do not all come back at once."""
    ceiling = min(FIRST_RETRY_SECONDS * 2**attempts, MAX_RETRY_SECONDS)
    return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - spreading retries, not a secret


@dataclass(frozen=True)
class Outcome:
    """What delivering an event came to."""

    note: str | None  # what could not be delivered and will not be retried
    direct_message: tuple[uuid.UUID, str] | None = None  # (review, status) to tell the requester
    about: str = DECISION  # what that direct message tells


class LeaseLost(Exception):
    """Another deliverer holds the event now: this one stops without touching it."""


@dataclass(frozen=True)
class Posted:
    """Where a message is in Slack."""

    channel: str
    ts: str


@dataclass
class Lane:
    """Events delivered in order per review, with slots of their own."""

    kinds: tuple[EventKind, ...]
    slots: int
    in_flight: dict[int, LeasedEvent] = field(default_factory=dict)  # by id, being delivered


@dataclass(frozen=True)
class DeliveryState:
    """What the database says about one event's delivery, read before talking to Slack."""

    facts: ReviewCardFacts
    channels: list[str]  # where a new review's cards go
    cards: list[ChatMessage]  # the cards already posted, to rewrite
    delivered: set[str]  # delivery keys whose message is already posted
    reviewers: list[str]  # chat ids of the linked reviewers, whose App Home lists the review
    updates_wait: float  # seconds until chat.update may be called again (cluster-wide 429)


class Notifier:
    """Delivers outbox events to Slack until stopped."""

    def __init__(
        self,
        *,
        database: Database,
        client: AsyncWebClient,
        poster: AsyncWebClient,
        pace: SlackPace,
        views: ViewRefresher,
        api_base_url: str,
        default_channel: str | None,
        lease_period: timedelta,
        on_token_refused: Callable[[str], None],
    ) -> None:
        self._lease_period = lease_period
        self._database = database
        self._views = views
        self._client = client
        # New messages go through a client that never retries on its own: a retried post
        # Slack cannot de-duplicate, so a post without an answer is looked for, not repeated.
        self._poster = poster
        self._pace = pace
        self._card_horizon = min(CARD_HORIZON_SECONDS, lease_period.total_seconds() / 2)
        self._dm_horizon = min(DM_HORIZON_SECONDS, lease_period.total_seconds() / 2)
        self._api_base_url = api_base_url
        self._default_channel = default_channel
        self._on_token_refused = on_token_refused
        self._wake = asyncio.Event()
        self._lanes = (Lane(CARD_KINDS, CARD_SLOTS), Lane(DIRECT_MESSAGE_KINDS, DM_SLOTS))
        self._dm_channels: dict[str, str] = {}  # Slack user id -> their DM channel with the bot
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start delivering in the background."""
        self._loop_task = asyncio.create_task(self._deliver_forever(), name="chat-notifier")

    def wake(self) -> None:
        """New events were committed; look now instead of at the next poll (loop thread)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop; events being delivered are given back to the outbox for the next deliverer."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        leased = [event for lane in self._lanes for event in lane.in_flight.values()]
        for lane in self._lanes:
            lane.in_flight.clear()
        await self._database.run(lambda db: release_leases(db=db, events=leased))

    async def _deliver_forever(self) -> None:
        while True:
            self._wake.clear()
            more_waiting = False
            for lane in self._lanes:
                free = min(lane.slots - len(lane.in_flight), LEASE_BATCH)
                events = await self._lease(lane, free) if free > 0 else []
                for event in events:
                    lane.in_flight[event.id] = event
                    task = asyncio.create_task(self._deliver(lane, event))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                more_waiting = more_waiting or (free > 0 and len(events) == free)
            if not more_waiting:  # caught up, or full: wait for news
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)

    async def _lease(self, lane: Lane, limit: int) -> list[LeasedEvent]:
        working_on = list(lane.in_flight)  # read here: the loop thread changes the lane
        try:
            return await self._database.run(
                lambda db: lease_deliverable_events(
                    db=db,
                    now=utc_now(),
                    limit=limit,
                    kinds=lane.kinds,
                    lease=self._lease_period,
                    working_on=working_on,
                )
            )
        except Exception:
            logger.exception("could not read the outbox; trying again")
            return []

    async def _deliver(self, lane: Lane, event: LeasedEvent) -> None:
        try:
            outcome = await self._deliver_event(event)
            await self._database.run(
                lambda db: mark_delivered(
                    db=db,
                    event=event,
                    now=utc_now(),
                    note=outcome.note,
                    direct_message=outcome.direct_message,
                    about=outcome.about,
                )
            )
        except asyncio.CancelledError:
            raise
        except NotYourTurn as wait:
            at = utc_now() + timedelta(seconds=wait.seconds)
            await self._database.run(lambda db: reschedule(db=db, event=event, at=at))
        except LeaseLost:
            logger.info("event %s is another deliverer's now; leaving it", event.id)
        except Exception as exc:
            await self._postpone(event, exc)
        finally:
            lane.in_flight.pop(event.id, None)
            self._wake.set()  # the review's next event may be due now

    async def _postpone(self, event: LeasedEvent, exc: Exception) -> None:
        delay = retry_delay(event.attempts)
        if isinstance(exc, SlackApiError):
            delay = max(delay, _retry_after(exc) or 0.0)
            if is_token_refusal(exc):
                self._on_token_refused(str(exc.response.get("error")))
        if isinstance(exc, SlackApiError | aiohttp.ClientError | TimeoutError | OSError):
            logger.warning("delivery of event %s postponed %.0f s: %s", event.id, delay, exc)
        else:
            logger.exception("delivery of event %s failed; retrying in %.0f s", event.id, delay)
        error = f"{type(exc).__name__}: {exc}"
        try:
            await self._database.run(
                lambda db: postpone(
                    db=db,
                    event=event,
                    now=utc_now(),
                    delay=timedelta(seconds=delay),
                    error=error,
                )
            )
        except Exception:
            # The lease runs out on its own and the event is offered again.
            logger.exception("could not postpone event %s", event.id)

    async def _deliver_event(self, event: LeasedEvent) -> Outcome:
        """Deliver one event; say what was skipped for good and what follows, if anything."""
        if utc_now() - event.created_at > STALE_AFTER:
            if event.attempts:
                return Outcome(f"not delivered: still failing after {event.attempts} attempts")
            return Outcome("not delivered: older than a day when the bot reached it")
        if event.kind == EventKind.REMINDER_DIGEST:
            return Outcome(await self._digest(event))
        state = await self._database.run(lambda db: self._read_state(db, event))
        if state is None:
            return Outcome("not delivered: the review no longer exists")
        entered = ReviewStatus(str(event.payload.get("status")))
        if event.kind == EventKind.DIRECT_MESSAGE:
            return Outcome(await self._direct_message(event, state, entered))
        if event.kind == EventKind.REVIEW_CREATED:
            note = await self._post_cards(event, state)
            self._views.request(state.reviewers)
            return Outcome(note)
        if event.kind == EventKind.REVIEW_REMINDER:
            return Outcome(await self._remind(event, state))
        note = await self._rewrite_cards(state)
        self._views.request(state.reviewers)
        if event.kind == EventKind.REVIEW_ACCESS_ENDED:
            if not state.facts.requester_chat_id:
                return Outcome(note or "no direct message: the requester has not linked Slack")
            told = (event.review_id, entered.value)
            return Outcome(note, direct_message=told, about=ACCESS_ENDED)
        if entered not in FINAL_DECISIONS or event.payload.get("status_before") == entered:
            return Outcome(note)
        if not state.facts.requester_chat_id:
            return Outcome(note or "no direct message: the requester has not linked Slack")
        return Outcome(note, direct_message=(event.review_id, entered.value))

    def _read_state(self, db: Session, event: LeasedEvent) -> DeliveryState | None:
        """Everything delivering ``event`` needs from the database, in one worker-thread trip."""
        facts = review_card_facts(db=db, review_id=event.review_id, api_base_url=self._api_base_url)
        if facts is None:
            return None
        channels: list[str] = []
        cards: list[ChatMessage] = []
        keys: list[str] = []  # a rewrite posts nothing new: no delivery keys to look up
        reviewers: list[str] = []
        updates_wait = 0.0
        if event.kind == EventKind.REVIEW_CREATED:
            channels = card_channels(
                db=db, review_id=event.review_id, default_channel=self._default_channel
            )
            keys = [card_key(event.review_id, channel) for channel in channels]
        elif event.kind == EventKind.DIRECT_MESSAGE:
            keys = [direct_message_key(event.id)]
        elif event.kind == EventKind.REVIEW_REMINDER:
            cards = posted_messages(db=db, review_id=event.review_id, kind=ChatMessageKind.CARD)
            keys = [reminder_key(event.id, card.channel) for card in cards]
        else:
            cards = posted_messages(db=db, review_id=event.review_id, kind=ChatMessageKind.CARD)
            updates_wait = wait_time(db=db, key=UPDATE_PACE, now=time.time())
        if event.kind == EventKind.REVIEW_REMINDER:
            reviewers = mentioned_reviewers(db=db, facts=facts)
        elif event.kind != EventKind.DIRECT_MESSAGE:
            reviewers = linked_reviewers(db=db, facts=facts)
        return DeliveryState(
            facts=facts,
            channels=channels,
            cards=cards,
            delivered=delivered_keys(db=db, keys=keys),
            reviewers=reviewers,
            updates_wait=updates_wait,
        )

    async def _post_cards(self, event: LeasedEvent, state: DeliveryState) -> str | None:
        facts = state.facts
        blocks, text = review_card(facts), review_card_text(facts)
        notes = []
        for channel in state.channels:
            key = card_key(facts.review_id, channel)
            if key in state.delivered:
                continue
            post = functools.partial(
                self._poster.chat_postMessage,
                channel=channel,
                text=text,
                blocks=blocks,
                unfurl_links=False,
                metadata={"event_type": METADATA_EVENT_TYPE, "event_payload": {"key": key}},
            )
            try:
                posted = await self._post_once(
                    event, key, pace=channel, horizon=self._card_horizon, post=post, channel=channel
                )
            except SlackApiError as exc:
                note = await self._permanent_or_raise(exc, f"card in {channel}", pace=channel)
                await self._record_failure(channel, str(exc.response.get("error")))
                notes.append(note)
                continue
            if posted is not None:
                await self._remember(key, facts.review_id, ChatMessageKind.CARD, posted)
        return "; ".join(notes) or None

    async def _rewrite_cards(self, state: DeliveryState) -> str | None:
        if state.cards and state.updates_wait > 0:
            raise NotYourTurn(state.updates_wait)
        blocks, text = review_card(state.facts), review_card_text(state.facts)
        notes = []
        for card in state.cards:
            try:
                await self._client.chat_update(
                    channel=card.channel, ts=card.ts, text=text, blocks=blocks
                )
            except SlackApiError as exc:
                note = await self._permanent_or_raise(
                    exc, f"card in {card.channel}", pace=UPDATE_PACE
                )
                notes.append(note)
        return "; ".join(notes) or None

    async def _direct_message(
        self, event: LeasedEvent, state: DeliveryState, entered: ReviewStatus
    ) -> str | None:
        facts = state.facts
        chat_id = facts.requester_chat_id
        key = direct_message_key(event.id)
        if not chat_id or key in state.delivered:
            return None
        if event.payload.get("about") == ACCESS_ENDED:
            text, blocks = access_ended_dm(facts)
        else:
            # It tells of the decision this event records, even if a later one followed.
            text, blocks = decision_dm(dataclasses.replace(facts, status=entered))
        return await self._send_direct(
            event, key, chat_id, text, blocks, kept_with=facts.review_id, what="direct message"
        )

    async def _send_direct(
        self,
        event: LeasedEvent,
        key: str,
        chat_id: str,
        text: str,
        blocks: list[dict[str, Any]],
        *,
        kept_with: uuid.UUID,
        what: str,
    ) -> str | None:
        """DM ``chat_id`` once, at the pace of their DM channel; the note if Slack never will."""
        pace = f"dm:{chat_id}"
        try:
            channel = await self._dm_channel(chat_id)
            posted = await self._post_once(
                event,
                key,
                pace=pace,
                horizon=self._dm_horizon,
                post=lambda: self._poster.chat_postMessage(
                    channel=channel, text=text, blocks=blocks, unfurl_links=False
                ),
            )
        except SlackApiError as exc:
            return await self._permanent_or_raise(exc, what, pace=pace)
        if posted is not None:
            await self._remember(key, kept_with, ChatMessageKind.DIRECT, posted)
        return None

    async def _remind(self, event: LeasedEvent, state: DeliveryState) -> str | None:
        """A reply in the thread of each of the review's cards, mentioning who has to decide.

        Reviewers who take reminders by direct message are left out: their digest tells them.
        A review decided since the reminder fell due needs none.
        """
        facts = state.facts
        if facts.status is not ReviewStatus.PENDING:
            return None
        groups = [line.group for line in facts.groups if line.status is ReviewStatus.PENDING]
        text = reminder_text(facts, groups, state.reviewers)
        notes = []
        for card in state.cards:
            key = reminder_key(event.id, card.channel)
            if key in state.delivered:
                continue
            post = functools.partial(
                self._poster.chat_postMessage,
                channel=card.channel,
                thread_ts=card.ts,
                text=text,
                unfurl_links=False,
            )
            try:
                posted = await self._post_once(
                    event, key, pace=card.channel, horizon=self._card_horizon, post=post
                )
            except SlackApiError as exc:
                notes.append(
                    await self._permanent_or_raise(
                        exc, f"reminder in {card.channel}", pace=card.channel
                    )
                )
                continue
            if posted is not None:
                await self._remember(key, facts.review_id, ChatMessageKind.REMINDER, posted)
        return "; ".join(notes) or None

    async def _digest(self, event: LeasedEvent) -> str | None:
        """One direct message to a reviewer listing every review still waiting on them."""
        user_id = uuid.UUID(str(event.payload["user_id"]))
        key = direct_message_key(event.id)

        def read(db: Session) -> tuple[str | None, list[ReviewCardFacts], bool]:
            user = db.get(User, user_id)
            if user is None or not user.chat_id or not user.reminders_by_dm:
                return None, [], False
            waiting = waiting_on(db, user, self._api_base_url)
            return user.chat_id, waiting, bool(delivered_keys(db=db, keys=[key]))

        chat_id, waiting, delivered = await self._database.run(read)
        if chat_id is None or delivered:
            return None
        if not waiting:
            return "no digest: nothing waits on the reviewer any more"
        text, blocks = digest_dm(waiting)
        # Kept with the first review it lists: every posted message is kept with a review.
        return await self._send_direct(
            event, key, chat_id, text, blocks, kept_with=waiting[0].review_id, what="digest"
        )

    async def _post_once(
        self,
        event: LeasedEvent,
        key: str,
        *,
        pace: str,
        horizon: float,
        post: Callable[[], Awaitable[AsyncSlackResponse]],
        channel: str | None = None,
    ) -> Posted | None:
        """Post the message of ``key`` in its turn, unless it is in Slack already.

        None when it was posted and remembered before; NotYourTurn when its turn is far away
        or another deliverer is posting it; LeaseLost when ``event`` is not ours any more. With
        ``channel``, a post that may have landed unanswered is looked for there first.
        """
        claim = await self._database.run(
            lambda db: claim_delivery(
                db=db,
                delivery_key=key,
                event=event,
                now=utc_now(),
                abandoned_after=self._lease_period,
            )
        )
        if claim.claim is Claim.LEASE_LOST:
            raise LeaseLost
        if claim.claim is Claim.POSTED:
            return None
        if claim.claim is Claim.BUSY:
            raise NotYourTurn(CLAIMED_ELSEWHERE_RETRY_SECONDS)
        if claim.claim is Claim.RECHECK and channel is not None and claim.since is not None:
            found = await self._find_posted_or_release(channel, key, since=claim.since)
            if found is not None:
                logger.info("found the card %s posted by an attempt without answer", key)
                return found
        # Claimed before the turn is taken, so nothing but the post itself stands between the
        # turn and Slack: turns reach Slack as far apart as they were booked.
        posting = False
        try:
            async with self._pace.turn(pace, horizon=horizon):
                # The turn may have been long in coming: the lease is renewed, unless another
                # deliverer took the event over meanwhile; then this one stops before calling
                # Slack.
                if not await self._database.run(
                    lambda db: renew_lease(
                        db=db, event=event, now=utc_now(), lease=self._lease_period
                    )
                ):
                    raise LeaseLost
                posting = True
                answer = await post()
        except LeaseLost:
            raise  # the claim may be the new holder's now: leave it
        except SlackApiError as exc:
            # Slack answered: it refused the post. A 5xx may still have posted it.
            await self._release(key, uncertain=exc.response.status_code >= 500)
            raise
        except BaseException:
            # No turn: nothing was sent. No answer (timeout, lost connection, cancelled): Slack
            # may have posted it.
            await asyncio.shield(self._release(key, uncertain=posting))
            raise
        return Posted(channel=str(answer["channel"]), ts=str(answer["ts"]))

    async def _find_posted_or_release(
        self, channel: str, key: str, *, since: datetime
    ) -> Posted | None:
        """``_find_posted``; when Slack cannot say now, the claim stays uncertain for the retry.

        A channel whose history the bot may not read (the scope was removed, it left the
        channel) cannot be searched: the card is posted, and that post reports the channel's
        own problem if there is one.
        """
        try:
            return await self._find_posted(channel, key, since=since)
        except SlackApiError as exc:
            if exc.response.get("error") in HISTORY_UNREADABLE:
                logger.warning("cannot look for card %s in %s: %s", key, channel, exc)
                return None
            await self._release(key, uncertain=True)
            raise
        except BaseException:
            await asyncio.shield(self._release(key, uncertain=True))
            raise

    async def _release(self, key: str, *, uncertain: bool) -> None:
        await self._database.run(
            lambda db: release_claim(db=db, delivery_key=key, uncertain=uncertain)
        )

    async def _find_posted(self, channel: str, key: str, *, since: datetime) -> Posted | None:
        """The card of ``key`` in ``channel``'s history since ``since``, if it is there.

        Extra copies (two posts without answers both landed) are deleted: one card per key.
        """
        oldest = f"{(since - RECHECK_MARGIN).timestamp():.6f}"
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._client.conversations_history(
                channel=channel, oldest=oldest, include_all_metadata=True, limit=200, cursor=cursor
            )
            for message in page.get("messages") or []:
                metadata = message.get("metadata") or {}
                if metadata.get("event_type") == METADATA_EVENT_TYPE and (
                    (metadata.get("event_payload") or {}).get("key") == key
                ):
                    found.append(str(message["ts"]))
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                break
        if not found:
            return None
        keep, *extra = sorted(found, key=float)
        for ts in extra:
            await self._delete_quietly(channel, ts)
        return Posted(channel=channel, ts=keep)

    async def _delete_quietly(self, channel: str, ts: str) -> None:
        try:
            await self._client.chat_delete(channel=channel, ts=ts)
        except SlackApiError as exc:
            logger.warning("could not delete a surplus card in %s: %s", channel, exc)

    async def _dm_channel(self, chat_id: str) -> str:
        if chat_id not in self._dm_channels:
            opened = await self._client.conversations_open(users=chat_id)
            self._dm_channels[chat_id] = str(opened["channel"]["id"])
        return self._dm_channels[chat_id]

    async def _remember(
        self, key: str, review_id: uuid.UUID, kind: ChatMessageKind, posted: Posted
    ) -> None:
        remembered = await self._database.run(
            lambda db: remember_message(
                db=db,
                delivery_key=key,
                review_id=review_id,
                kind=kind,
                channel=posted.channel,
                ts=posted.ts,
                now=utc_now(),
            )
        )
        if not remembered:  # another deliverer's copy is the card: ours would never be rewritten
            await self._delete_quietly(posted.channel, posted.ts)

    async def _record_failure(self, channel: str, error: str) -> None:
        """The channel's status shows it failing until a card goes through again."""
        await self._database.run(
            lambda db: record_failure(db=db, channel=channel, error=error, now=utc_now())
        )

    async def _hold_quietly(self, pace: str, seconds: float) -> None:
        try:
            await self._pace.hold(pace, seconds)
        except Exception:
            logger.exception("could not hold %s for Slack's rate limit", pace)

    async def _permanent_or_raise(
        self, exc: SlackApiError, what: str, *, pace: str | None = None
    ) -> str:
        """The note for an error Slack will never get over; any other is raised to retry.

        A 429 holds ``pace`` for every replica before the retry.
        """
        retry_after = _retry_after(exc)
        if retry_after is not None and pace is not None:
            await self._hold_quietly(pace, retry_after)
        return permanent_note(exc, what)


def permanent_note(exc: SlackApiError, what: str) -> str:
    """What to note on a delivery Slack will never take; any other error is raised, to retry."""
    if not is_permanent(exc):
        raise exc
    error = exc.response.get("error")
    logger.warning("Slack will not take the %s: %s", what, error)
    return f"{what}: {error}"


def _retry_after(exc: SlackApiError) -> float | None:
    """The seconds a 429 asks us to wait, if Slack said."""
    if exc.response is None or exc.response.status_code != 429:
        return None
    retry_after = str(exc.response.headers.get("Retry-After", ""))
    return float(retry_after) if retry_after.isdigit() else None
