"""The chat bot's doors into the API: its status, account linking, and Slack's HTTP mode."""

import pydantic
from fastapi import APIRouter, Request, Response

from api.deps import ChatDep, CurrentUser, DbDep
from models.chat.links import finish_chat_link
from models.chat.runtime import ChatStatus, SignedChatRequest
from models.core import errors
from models.core.clock import utc_now
from models.core.request_body import RequestBody
from models.users.schema import UserPublic
from models.users.service import require_admin

router = APIRouter(tags=["chat"])
slack_router = APIRouter(tags=["chat"])


@router.get("/plugins/chat/status")
def chat_status(user: CurrentUser, chat: ChatDep) -> ChatStatus:
    """How the Slack bot is doing: connected, to which team, and its last error (admins)."""
    require_admin(user)
    if chat is None:
        raise errors.NotConfigured("this process does not run the chat bot")
    return chat.status()


class ChatLinkIn(RequestBody):
    code: str = pydantic.Field(min_length=1, max_length=64, description="From /accessgate link.")


@router.post("/users/me/chat-link")
def link_chat_account(request: ChatLinkIn, db: DbDep, user: CurrentUser) -> UserPublic:
    """Link the Slack account that typed `/accessgate link` to the signed-in user."""
    return finish_chat_link(db=db, actor=user, code=request.code, now=utc_now())


@slack_router.post("/slack/events", include_in_schema=False)
async def slack_events(request: Request, chat: ChatDep) -> Response:
    """Slack's HTTP mode: events, interactions and commands, signed with the signing secret."""
    if chat is None:
        raise errors.NotConfigured("this process does not run the chat bot")
    answer = await chat.handle_http(
        SignedChatRequest(body=await request.body(), headers=dict(request.headers))
    )
    return Response(content=answer.body, status_code=answer.status, headers=dict(answer.headers))
