"""Slack listeners: parse what Slack sent, call the review service, let Slack show the result.

Every listener acknowledges first (Slack gives three seconds) and then works; a button that
opens a modal opens it before any check, because its trigger expires three seconds after the
click. Decisions go through ``models.reviews.service.update_review``, the same function as
``PUT /api/reviews/{id}``; the cards change through the outbox like any other decision.
Refusals are raised and worded by the one error handler (``handle_error``); listeners never
word them. Answers reach only the person who acted, wherever they acted: through the
interaction's ``response_url`` first, then an ephemeral message in the channel, then a DM; in a
modal, the modal itself says it.
"""

import asyncio
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pydantic
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from sqlmodel import Session

from bot import blocks, modals
from bot.actions import WINDOW_END_BLOCK, WINDOW_START_BLOCK, ActionId, ViewId
from bot.database import Database
from bot.fresh_views import pending_summary, read_views, waiting_on
from bot.refusals import refusal_text
from models.chat.cards import ReviewCardFacts, site_url
from models.chat.links import (
    LINK_CODE_LIFETIME,
    link_by_verified_email,
    linked_user,
    start_chat_link,
)
from models.chat.pending_lists import remember_pending_list
from models.core import errors
from models.core.clock import utc_now
from models.reviews.machine import Decision
from models.reviews.schema import Door, ReviewDecisionRequest, TimeWindow
from models.reviews.service import update_review
from models.users.schema import User
from models.users.service import set_reminder_preference

logger = logging.getLogger("accessgate.bot")

WORKING = "Working on it…"
REJECTED = "Rejected. The review's cards show it, and the requester is told."
APPROVED_IN_WINDOW = "Approved for your groups, within the time window. The cards show it."


@dataclass(frozen=True)
class BotContext:
    """What listeners need besides Slack's request; put in Bolt's context by a middleware."""

    database: Database
    api_base_url: str
    match_email: bool


def register_listeners(app: AsyncApp, bot_context: BotContext) -> None:
    """Attach every listener, the context middleware and the error handler to ``app``."""

    async def add_bot_context(
        context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
    ) -> None:
        context["bot"] = bot_context
        await next()

    app.use(add_bot_context)
    app.action(ActionId.APPROVE)(replies_with_refusals(approve))
    app.action(ActionId.FORCE_APPROVE)(replies_with_refusals(force_approve))
    app.action(ActionId.REVOKE)(replies_with_refusals(revoke))
    app.action(ActionId.REJECT)(replies_with_refusals(open_reject_modal))
    app.action(ActionId.APPROVE_WINDOW)(replies_with_refusals(open_time_window_modal))
    app.view(ViewId.REJECT)(replies_with_refusals(submit_rejection))
    app.view(ViewId.TIME_WINDOW)(replies_with_refusals(submit_time_window))
    app.command("/accessgate")(replies_with_refusals(accessgate_command))
    app.event("app_home_opened")(replies_with_refusals(publish_home))
    app.action(ActionId.REMINDERS_BY_DM)(replies_with_refusals(set_reminders_by_dm))
    app.error(handle_error)


Listener = Callable[..., Awaitable[None]]


def replies_with_refusals(listener: Listener) -> Listener:
    """Answer what ``listener`` raises with ``handle_error`` instead of letting Bolt see it.

    Bolt drops an acknowledgement when the listener raises right after acking (within its
    10 ms polling of the ack), and Slack then shows the clicker an error; refusals come within
    milliseconds, so they are answered here. Bolt still reaches ``handle_error`` for its own
    failures.
    """

    @functools.wraps(listener)
    async def guarded(**kwargs: Any) -> None:
        try:
            await listener(**kwargs)
        except Exception as error:
            await handle_error(error, kwargs["body"], kwargs["client"])

    return guarded


# -- buttons ----------------------------------------------------------------------------------


async def approve(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Approve for every reviewer group the clicker is in."""
    await ack()
    await _decide(body, context, client, ReviewDecisionRequest(status=Decision.APPROVED))


async def force_approve(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Approve for every group at once (members of a force-approval group)."""
    await ack()
    request = ReviewDecisionRequest(status=Decision.APPROVED, force_review=True)
    await _decide(body, context, client, request)


async def revoke(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """End approved access (the requester or an admin); Slack asked for confirmation."""
    await ack()
    await _decide(body, context, client, ReviewDecisionRequest(status=Decision.REVOKED))


async def open_reject_modal(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Ask for the rejection reason; the decision happens when the modal is submitted."""
    await ack()
    view = modals.reject_modal(review_id=_clicked_review(body), channel_id=_channel_of(body))
    await _open_then_check(body, context, client, view)


async def open_time_window_modal(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Ask for the time window to approve with."""
    await ack()
    view = modals.time_window_modal(review_id=_clicked_review(body), channel_id=_channel_of(body))
    await _open_then_check(body, context, client, view)


async def _open_then_check(
    body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient, view: dict[str, Any]
) -> None:
    """Open the modal while its trigger is fresh, then check who clicked; a refusal replaces it.

    The check may be slow (e-mail matching asks Slack who the user is), and the trigger dies
    three seconds after the click.
    """
    opened = await client.views_open(trigger_id=body["trigger_id"], view=view)
    try:
        await _acting_user(context, client, body["user"]["id"])  # unlinked users learn it now
    except errors.DomainError as error:
        await _tell_in_modal(client, str(opened["view"]["id"]), error)


# -- modals -----------------------------------------------------------------------------------


async def submit_rejection(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Reject with the reason typed in the modal."""
    view = body["view"]
    review_id, _channel = modals.modal_context(view)  # handle_error reads the channel itself
    reason = modals.rejection_reason_from(view).strip() or None
    request = ReviewDecisionRequest(status=Decision.REJECTED, rejection_reason=reason)
    await _decide_in_modal(ack, context, client, body, review_id, request, done=REJECTED)


async def submit_time_window(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Approve with the time window picked in the modal; a bad window stays in the modal."""
    view = body["view"]
    review_id, _channel_id = modals.modal_context(view)
    try:
        start, end = modals.time_window_from(view)
        window = TimeWindow(type="time_range", configuration={"start_time": start, "end_time": end})
    except (ValueError, pydantic.ValidationError) as exc:
        problem = _first_problem(exc)
        await ack(
            response_action="errors",
            errors={WINDOW_START_BLOCK: problem, WINDOW_END_BLOCK: problem},
        )
        return
    request = ReviewDecisionRequest(status=Decision.APPROVED, time_window=window)
    await _decide_in_modal(ack, context, client, body, review_id, request, done=APPROVED_IN_WINDOW)


async def _decide_in_modal(
    ack: AsyncAck,
    context: AsyncBoltContext,
    client: AsyncWebClient,
    body: dict[str, Any],
    review_id: uuid.UUID,
    request: ReviewDecisionRequest,
    *,
    done: str,
) -> None:
    """Decide what the modal asked, then say in the same modal what came of it.

    The answer goes in the acknowledgement itself when the decision is quick, as it nearly
    always is. Acking at once with a "working" view and updating it afterwards raced: the
    update could reach Slack before Slack applied the acknowledgement, which then put the
    "working" view back over the answer. Only a decision slower than ``MODAL_ANSWER_SECONDS``
    is acknowledged as working first, and its answer follows well after.
    """
    view = body["view"]

    async def answer() -> dict[str, Any]:
        try:
            await _decide_review(context, client, body["user"]["id"], review_id, request)
        except errors.DomainError as error:
            return _refusal_notice(error)
        return _notice(view, done)

    deciding = asyncio.ensure_future(answer())
    try:  # shielded: running out of time must not cancel the decision
        notice = await asyncio.wait_for(asyncio.shield(deciding), MODAL_ANSWER_SECONDS)
    except TimeoutError:
        await ack(response_action="update", view=_notice(view, WORKING))
        await client.views_update(view_id=str(view["id"]), view=await deciding)
        return
    await ack(response_action="update", view=notice)


MODAL_ANSWER_SECONDS = 2.0
"""How long a modal's decision may take to be answered in the acknowledgement itself; Slack
waits 3 s for it."""


def _notice(view: dict[str, Any], text: str) -> dict[str, Any]:
    """The same modal, under its own title, now only telling ``text``."""
    title = (view.get("title") or {}).get("text") or "accessgate"
    return modals.notice_modal(title=str(title), text=text)


async def _tell_in_modal(client: AsyncWebClient, view_id: str, error: errors.DomainError) -> None:
    await client.views_update(view_id=view_id, view=_refusal_notice(error))


def _refusal_notice(error: errors.DomainError) -> dict[str, Any]:
    return modals.notice_modal(title="Not done", text=refusal_text(error))


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
    return str(exc)


# -- the slash command and App Home -------------------------------------------------------------


async def accessgate_command(
    ack: AsyncAck,
    body: dict[str, Any],
    command: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
    respond: AsyncRespond,
) -> None:
    """`/accessgate link | pending | help`."""
    words = (command.get("text") or "").split()
    subcommand = words[0].lower() if words else "help"
    if subcommand == "help":
        await ack(text=blocks.help_text())
        return
    if subcommand not in ("link", "pending"):
        await ack(text=blocks.unknown_subcommand_text(subcommand))
        return
    await ack()
    bot: BotContext = context["bot"]
    chat_id = command["user_id"]
    if subcommand == "link":
        code = await bot.database.run(
            lambda db: start_chat_link(db=db, chat_id=chat_id, now=utc_now())
        )
        minutes = int(LINK_CODE_LIFETIME.total_seconds() // 60)
        link_url = f"{site_url(bot.api_base_url)}/chat/link?{urlencode({'code': code})}"
        await respond(
            text=blocks.link_instructions(code, link_url, minutes),
            response_type="ephemeral",
        )
        return
    reviewer = await _acting_user(context, client, chat_id)
    response_url = str(command["response_url"])

    def list_and_remember(db: Session) -> list[ReviewCardFacts]:
        # Decisions from any door replace this list while Slack takes its response_url.
        remember_pending_list(db=db, chat_id=chat_id, response_url=response_url, now=utc_now())
        return waiting_on(db, reviewer, bot.api_base_url)

    facts = await bot.database.run(list_and_remember)
    await respond(
        text=pending_summary(facts),
        blocks=blocks.pending_blocks(facts),
        response_type="ephemeral",
    )


async def publish_home(
    body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """The App Home tab: the reviews waiting on the user, or how to link their account."""
    if event.get("tab", "home") != "home":
        return
    bot: BotContext = context["bot"]
    chat_id = event["user"]

    views = await bot.database.run(lambda db: read_views(db, chat_id, bot.api_base_url))
    await client.views_publish(user_id=chat_id, view=views.home)


async def set_reminders_by_dm(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """The App Home's reminder preference: a digest DM, or mentions under the cards."""
    await ack()
    bot: BotContext = context["bot"]
    chat_id = body["user"]["id"]
    user = await _acting_user(context, client, chat_id)
    wanted = (body.get("actions") or [{}])[0].get("value") == "on"
    await bot.database.run(lambda db: set_reminder_preference(db=db, user=user, by_dm=wanted))
    views = await bot.database.run(lambda db: read_views(db, chat_id, bot.api_base_url))
    await client.views_publish(user_id=chat_id, view=views.home)


# -- deciding ---------------------------------------------------------------------------------


async def _decide(
    body: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
    request: ReviewDecisionRequest,
) -> None:
    await _decide_review(context, client, body["user"]["id"], _clicked_review(body), request)


async def _decide_review(
    context: AsyncBoltContext,
    client: AsyncWebClient,
    chat_id: str,
    review_id: uuid.UUID,
    request: ReviewDecisionRequest,
) -> None:
    bot: BotContext = context["bot"]

    def decide(db: Session, actor: User | None = None) -> None:
        update_review(
            db=db,
            review_ref=str(review_id),
            actor=actor or linked_user(db=db, chat_id=chat_id),
            request=request,
            now=utc_now(),
            door=Door.SLACK,
        )

    try:  # one trip to the database for a linked user, the usual case
        await bot.database.run(decide)
    except errors.ChatUserNotLinked:
        if not bot.match_email:
            raise
        actor = await _matched_by_email(context, client, chat_id)
        await bot.database.run(lambda db: decide(db, actor))


async def _acting_user(context: AsyncBoltContext, client: AsyncWebClient, chat_id: str) -> User:
    """The gateway user a Slack user acts as; with e-mail matching on, linked on first use."""
    bot: BotContext = context["bot"]
    try:
        return await bot.database.run(lambda db: linked_user(db=db, chat_id=chat_id))
    except errors.ChatUserNotLinked:
        if not bot.match_email:
            raise
        return await _matched_by_email(context, client, chat_id)


async def _matched_by_email(
    context: AsyncBoltContext, client: AsyncWebClient, chat_id: str
) -> User:
    """Link an unlinked Slack user by verified e-mail (the organization opted in)."""
    bot: BotContext = context["bot"]
    email = await _verified_email(client, chat_id)
    matched = await bot.database.run(
        lambda db: link_by_verified_email(db=db, chat_id=chat_id, email=email)
    )
    if matched is None:
        raise errors.ChatUserNotLinked("no gateway user has this Slack account's e-mail address")
    return matched  # only active users are matched


async def _verified_email(client: AsyncWebClient, chat_id: str) -> str:
    # Slack only shows addresses its workspace confirmed (users:read.email).
    try:
        answer = await client.users_info(user=chat_id)
    except SlackApiError as exc:
        cause = _slack_error(exc)
        logger.warning("users.info refused for %s (%s): cannot match by e-mail", chat_id, cause)
        raise errors.ChatEmailUnavailable(
            f"Slack would not say your e-mail address ({cause})"
        ) from exc
    user = answer.get("user") or {}
    return str((user.get("profile") or {}).get("email") or "")


def _clicked_review(body: dict[str, Any]) -> uuid.UUID:
    try:
        return uuid.UUID(body["actions"][0]["value"])
    except (KeyError, IndexError, ValueError) as exc:
        raise errors.NotFound("the button does not name a review") from exc


def _channel_of(body: dict[str, Any]) -> str | None:
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
        "channel_id"
    )
    return str(channel) if channel else None


# -- refusals ---------------------------------------------------------------------------------


async def handle_error(error: Exception, body: dict[str, Any], client: AsyncWebClient) -> None:
    """Tell the person who acted why it did not work, where only they can see it."""
    if not isinstance(error, errors.DomainError):
        logger.error("a Slack request failed", exc_info=error)
    user_id = (body.get("user") or {}).get("id") or body.get("user_id")
    if not user_id:
        return
    await tell_privately(body, client, str(user_id), refusal_text(error))


async def tell_privately(
    body: dict[str, Any], client: AsyncWebClient, user_id: str, text: str
) -> None:
    """Tell only the person who acted, wherever they acted.

    The interaction's ``response_url`` reaches them in any conversation, even one the bot is
    not in; an ephemeral message needs the bot in the channel, so it is the fallback, and the
    bot's DM with the person is the last resort (App Home, modals opened without a channel).
    """
    response_url = body.get("response_url")
    if response_url and await _respond_ephemerally(str(response_url), text):
        return
    channel = _channel_of(body) or body.get("channel_id") or _modal_channel(body)
    try:
        if channel:
            try:
                await client.chat_postEphemeral(channel=channel, user=user_id, text=text)
                return
            except SlackApiError as exc:
                logger.info("no ephemeral in %s (%s); sending a DM", channel, _slack_error(exc))
        opened = await client.conversations_open(users=user_id)
        await client.chat_postMessage(channel=opened["channel"]["id"], text=text)
    except SlackApiError as exc:
        logger.warning("could not tell %s (%s): %s", user_id, _slack_error(exc), text)


async def _respond_ephemerally(response_url: str, text: str) -> bool:
    """Answer through a response_url; False when Slack will not take it (expired, used up)."""
    try:
        answer = await AsyncWebhookClient(response_url).send(
            text=text, response_type="ephemeral", replace_original=False
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        logger.info("the response_url could not be reached (%s)", exc)
        return False
    if answer.status_code != 200:
        logger.info("the response_url refused the answer (%s %s)", answer.status_code, answer.body)
        return False
    return True


def _slack_error(exc: SlackApiError) -> str:
    return str(exc.response.get("error") or exc)


def _modal_channel(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    if not view:
        return None
    try:
        return modals.modal_context(view)[1]
    except ValueError:
        return None
