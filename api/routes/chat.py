"""The chat bot's doors into the API: its status and deliveries, account linking, and Slack's
HTTP mode."""

import dataclasses
import time
from typing import Annotated

import pydantic
from fastapi import APIRouter, Path, Query, Request, Response

from api.deps import (
    ChatDep,
    CredentialsFirstRoute,
    CurrentUser,
    DbDep,
    ThrottleDep,
    client_address,
)
from api.errors import more_error_responses
from models.chat.channel_health import channel_health
from models.chat.links import finish_chat_link
from models.chat.messages import CARD_KINDS, DIRECT_MESSAGE_KINDS
from models.chat.runtime import ChatStatus, SignedChatRequest
from models.core import errors
from models.core.clock import utc_now
from models.core.request_body import RequestBody
from models.core.throttle import CHAT_LINK_CODES
from models.delivery.deliveries import (
    MAX_PAGE,
    DeliveryPage,
    DeliveryPublic,
    DeliveryStatus,
    list_deliveries,
    retry_delivery,
)
from models.users.schema import UserPublic
from models.users.service import require_admin

router = APIRouter(route_class=CredentialsFirstRoute, tags=["chat"])
slack_router = APIRouter(route_class=CredentialsFirstRoute, tags=["chat"])


CHAT_KINDS = CARD_KINDS + DIRECT_MESSAGE_KINDS
MAX_ID = 2**63 - 1  # the largest id a database integer holds


@router.get("/plugins/chat/status")
def chat_status(user: CurrentUser, chat: ChatDep, db: DbDep) -> ChatStatus:
    """How the Slack bot is doing: connected, to which team, its last error, and how posting to
    each channel goes (admins)."""
    require_admin(user)
    if chat is None:
        raise errors.NotConfigured("this process does not run the chat bot")
    return dataclasses.replace(chat.status(), channels=channel_health(db))


@router.get("/plugins/chat/deliveries")
def list_chat_deliveries(
    user: CurrentUser,
    db: DbDep,
    status: DeliveryStatus = DeliveryStatus.FAILED,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Annotated[str | None, Query(pattern=r"^\d{1,18}$")] = None,
) -> DeliveryPage:
    """Cards and direct messages by delivery status, newest first (admins).

    failed: Slack will never take them as they were (the bot is not in the channel, the
    channel is archived, ...) or they kept failing for a day; each says why. retrying: failed
    for now, tried again with backoff. pending: not delivered yet.
    """
    require_admin(user)
    return list_deliveries(db=db, kinds=CHAT_KINDS, status=status, limit=limit, cursor=cursor)


@router.post(
    "/plugins/chat/deliveries/{delivery_id}/retry",
    status_code=201,
    responses=more_error_responses({409: "The delivery has not failed (or was retried already)"}),
)
def retry_chat_delivery(
    delivery_id: Annotated[int, Path(ge=1, le=MAX_ID)], user: CurrentUser, db: DbDep
) -> DeliveryPublic:
    """Deliver a failed card or direct message again, say once the bot was invited back into
    the channel (admins). Answers the new delivery; the failed one records it as retried_as."""
    require_admin(user)
    return retry_delivery(db=db, kinds=CHAT_KINDS, delivery_id=delivery_id, now=utc_now())


class ChatLinkIn(RequestBody):
    code: str = pydantic.Field(min_length=1, max_length=64, description="From /accessgate link.")


@router.post("/users/me/chat-link")
def link_chat_account(
    request: Request, body: ChatLinkIn, db: DbDep, user: CurrentUser, throttle: ThrottleDep
) -> UserPublic:
    """Link the Slack account that typed `/accessgate link` to the signed-in user.

    Wrong codes are throttled per user and per client address (429 with `Retry-After`).
    """
    address, principal = client_address(request), str(user.id)
    throttle.refuse_if_blocked(CHAT_LINK_CODES, address=address, principal=principal)
    try:
        return finish_chat_link(db=db, actor=user, code=body.code, now=utc_now())
    except errors.UnknownCode:
        throttle.record_failure(CHAT_LINK_CODES, address=address, principal=principal)
        raise


@slack_router.post("/slack/events", include_in_schema=False)
async def slack_events(request: Request, chat: ChatDep) -> Response:
    """Slack's HTTP mode: events, interactions and commands, signed with the signing secret."""
    if chat is None:
        raise errors.NotConfigured("this process does not run the chat bot")
    _refuse_unsigned(request)  # before reading the body: only Slack's requests are read
    answer = await chat.handle_http(
        SignedChatRequest(body=await request.body(), headers=dict(request.headers))
    )
    return Response(content=answer.body, status_code=answer.status, headers=dict(answer.headers))


SLACK_TIMESTAMP_TOLERANCE_SECONDS = 300  # as Slack's own verification: five minutes


def _refuse_unsigned(request: Request) -> None:
    """401 for a request that cannot be Slack's: no signature, or no recent timestamp.

    The signature itself covers the body, so the bot checks it once the body is read; these
    headers are enough to turn strangers away first.
    """
    signature = request.headers.get("x-slack-signature", "")
    try:
        timestamp = int(request.headers.get("x-slack-request-timestamp", ""))
    except ValueError:
        timestamp = 0
    fresh = abs(time.time() - timestamp) <= SLACK_TIMESTAMP_TOLERANCE_SECONDS
    if not signature.startswith("v0=") or not fresh:
        raise errors.Unauthenticated(
            "the request is not signed by Slack: X-Slack-Signature and an "
            "X-Slack-Request-Timestamp within five minutes are needed"
        )
