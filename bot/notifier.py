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
- ``chat.direct_message``: DM the requester, at the pace of their DM channel. These go in a lane
  of their own (own order, own slots): fifty decisions for one requester wait for their turns
  in the outbox, not in front of anybody's cards.

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
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from sqlmodel import Session

from bot.blocks import decision_dm, review_card, review_card_text
from bot.database import Database
from bot.fresh_views import ViewRefresher
from bot.pacing import ChannelPacer
from bot.slack_api import is_token_refusal
from models.chat.cards import ReviewCardFacts, linked_reviewers, review_card_facts
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
)
from models.core.clock import utc_now
from models.delivery.leases import (
    LeasedEvent,
    lease_deliverable_events,
    mark_delivered,
    postpone,
    release_leases,
    reschedule,
)
from models.delivery.outbox import EventKind
from models.reviews.machine import ReviewStatus

logger = logging.getLogger("accessgate.bot.notifier")

# Cards and direct messages have slots of their own, so a requester's DMs waiting for their
# turn never hold back anyone's cards.
CARD_SLOTS = 200
DM_SLOTS = 50
MAX_PACING_WAIT_SECONDS = 1.5
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


class NotYourTurn(Exception):
    """The message's turn in Slack's pace is ``seconds`` away: come back then."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"next turn in {seconds:.1f} s")
        self.seconds = seconds


@dataclass
class Lane:
    """Events delivered in order per review, with slots of their own."""

    kinds: tuple[EventKind, ...]
    slots: int
    in_flight: set[int] = field(default_factory=set)  # event ids being delivered


@dataclass(frozen=True)
class DeliveryState:
    """What the database says about one event's delivery, read before talking to Slack."""

    facts: ReviewCardFacts
    channels: list[str]  # where a new review's cards go
    cards: list[ChatMessage]  # the cards already posted, to rewrite
    delivered: set[str]  # delivery keys whose message is already posted
    reviewers: list[str]  # chat ids of the linked reviewers, whose App Home lists the review


class Notifier:
    """Delivers outbox events to Slack until stopped."""

    def __init__(
        self,
        *,
        database: Database,
        client: AsyncWebClient,
        pacer: ChannelPacer,
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
        self._pacer = pacer
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
        leased = [event_id for lane in self._lanes for event_id in lane.in_flight]
        for lane in self._lanes:
            lane.in_flight.clear()
        await self._database.run(lambda db: release_leases(db=db, event_ids=leased))

    async def _deliver_forever(self) -> None:
        while True:
            self._wake.clear()
            more_waiting = False
            for lane in self._lanes:
                free = lane.slots - len(lane.in_flight)
                events = await self._lease(lane, free) if free > 0 else []
                for event in events:
                    if event.id in lane.in_flight:
                        continue  # its lease ran out while it waited for its turn: still ours
                    lane.in_flight.add(event.id)
                    task = asyncio.create_task(self._deliver(lane, event))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                more_waiting = more_waiting or (free > 0 and len(events) == free)
            if not more_waiting:  # caught up, or full: wait for news
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)

    async def _lease(self, lane: Lane, limit: int) -> list[LeasedEvent]:
        try:
            return await self._database.run(
                lambda db: lease_deliverable_events(
                    db=db, now=utc_now(), limit=limit, kinds=lane.kinds, lease=self._lease_period
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
                    event_id=event.id,
                    now=utc_now(),
                    note=outcome.note,
                    direct_message=outcome.direct_message,
                )
            )
        except asyncio.CancelledError:
            raise
        except NotYourTurn as wait:
            at = utc_now() + timedelta(seconds=wait.seconds)
            await self._database.run(lambda db: reschedule(db=db, event_id=event.id, at=at))
        except Exception as exc:
            await self._postpone(event, exc)
        finally:
            lane.in_flight.discard(event.id)
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
                    event_id=event.id,
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
            return Outcome("not delivered: older than a day when the bot reached it")
        state = await self._database.run(lambda db: self._read_state(db, event))
        if state is None:
            return Outcome("not delivered: the review no longer exists")
        entered = ReviewStatus(str(event.payload.get("status")))
        if event.kind == EventKind.DIRECT_MESSAGE:
            return Outcome(await self._direct_message(event, state, entered))
        if event.kind == EventKind.REVIEW_CREATED:
            note = await self._post_cards(state)
            self._views.request(state.reviewers)
            return Outcome(note)
        note = await self._rewrite_cards(state)
        self._views.request(state.reviewers)
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
        if event.kind == EventKind.REVIEW_CREATED:
            channels = card_channels(
                db=db, review_id=event.review_id, default_channel=self._default_channel
            )
            keys = [card_key(event.review_id, channel) for channel in channels]
        elif event.kind == EventKind.DIRECT_MESSAGE:
            keys = [direct_message_key(event.id)]
        else:
            cards = posted_messages(db=db, review_id=event.review_id, kind=ChatMessageKind.CARD)
        if event.kind != EventKind.DIRECT_MESSAGE:
            reviewers = linked_reviewers(db=db, facts=facts)
        return DeliveryState(
            facts=facts,
            channels=channels,
            cards=cards,
            delivered=delivered_keys(db=db, keys=keys),
            reviewers=reviewers,
        )

    async def _post_cards(self, state: DeliveryState) -> str | None:
        facts = state.facts
        blocks, text = review_card(facts), review_card_text(facts)
        notes = []
        for channel in state.channels:
            key = card_key(facts.review_id, channel)
            if key in state.delivered:
                continue
            try:
                async with self._pacer.turn(channel):
                    post = functools.partial(
                        self._client.chat_postMessage,
                        channel=channel,
                        text=text,
                        blocks=blocks,
                        unfurl_links=False,
                    )
                    answer = await self._post_once(key, post)
            except SlackApiError as exc:
                self._hold_on_rate_limit(channel, exc)
                notes.append(self._permanent_or_raise(exc, f"card in {channel}"))
                continue
            if answer is not None:
                await self._remember(key, facts.review_id, ChatMessageKind.CARD, answer)
        return "; ".join(notes) or None

    async def _rewrite_cards(self, state: DeliveryState) -> str | None:
        blocks, text = review_card(state.facts), review_card_text(state.facts)
        notes = []
        for card in state.cards:
            try:
                await self._client.chat_update(
                    channel=card.channel, ts=card.ts, text=text, blocks=blocks
                )
            except SlackApiError as exc:
                notes.append(self._permanent_or_raise(exc, f"card in {card.channel}"))
        return "; ".join(notes) or None

    async def _direct_message(
        self, event: LeasedEvent, state: DeliveryState, entered: ReviewStatus
    ) -> str | None:
        facts = state.facts
        chat_id = facts.requester_chat_id
        key = direct_message_key(event.id)
        if not chat_id or key in state.delivered:
            return None
        # A turn far away gives the slot back to the outbox; the comebacks are spread one
        # interval apart so they do not all return at once.
        pace = f"dm:{chat_id}"
        if self._pacer.wait_time(pace) > MAX_PACING_WAIT_SECONDS:
            raise NotYourTurn(self._pacer.book(f"dm-queue:{chat_id}"))
        # The message tells of the decision this event records, even if a later one followed.
        text, blocks = decision_dm(dataclasses.replace(facts, status=entered))
        try:
            channel = await self._dm_channel(chat_id)
            async with self._pacer.turn(pace):
                answer = await self._post_once(
                    key,
                    lambda: self._client.chat_postMessage(
                        channel=channel, text=text, blocks=blocks, unfurl_links=False
                    ),
                )
        except SlackApiError as exc:
            self._hold_on_rate_limit(pace, exc)
            return self._permanent_or_raise(exc, "direct message")
        if answer is not None:
            await self._remember(key, facts.review_id, ChatMessageKind.DIRECT, answer)
        return None

    async def _post_once(
        self, key: str, post: Callable[[], Awaitable[AsyncSlackResponse]]
    ) -> AsyncSlackResponse | None:
        """Post the message of ``key`` if no deliverer in the cluster did or is doing it.

        None when it is posted already; NotYourTurn while another deliverer is posting it.
        """
        claim = await self._database.run(
            lambda db: claim_delivery(db=db, delivery_key=key, now=utc_now())
        )
        if claim is Claim.POSTED:
            return None
        if claim is Claim.BUSY:
            raise NotYourTurn(CLAIMED_ELSEWHERE_RETRY_SECONDS)
        try:
            return await post()
        except Exception:
            await self._database.run(lambda db: release_claim(db=db, delivery_key=key))
            raise

    async def _dm_channel(self, chat_id: str) -> str:
        if chat_id not in self._dm_channels:
            opened = await self._client.conversations_open(users=chat_id)
            self._dm_channels[chat_id] = str(opened["channel"]["id"])
        return self._dm_channels[chat_id]

    async def _remember(
        self, key: str, review_id: uuid.UUID, kind: ChatMessageKind, answer: AsyncSlackResponse
    ) -> None:
        channel, ts = str(answer["channel"]), str(answer["ts"])
        await self._database.run(
            lambda db: remember_message(
                db=db,
                delivery_key=key,
                review_id=review_id,
                kind=kind,
                channel=channel,
                ts=ts,
                now=utc_now(),
            )
        )

    def _hold_on_rate_limit(self, channel: str, exc: SlackApiError) -> None:
        retry_after = _retry_after(exc)
        if retry_after is not None:
            self._pacer.hold(channel, retry_after)

    @staticmethod
    def _permanent_or_raise(exc: SlackApiError, what: str) -> str:
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
