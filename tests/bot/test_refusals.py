"""Refusals in plain words, answered by the one handler whatever the listener raised."""

import asyncio
from collections.abc import Awaitable
from typing import Any, cast

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners import handle_error, replies_with_refusals
from bot.refusals import refusal_text
from models.core import errors


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (errors.ChatUserNotLinked("x"), "Type `/accessgate link` to link it"),
        (errors.InactiveUser("x"), "Your accessgate account is inactive"),
        (errors.SelfApproval("x"), "You cannot approve your own session"),
        (errors.NotAReviewer("x"), "You are not in any reviewer group of this review"),
        (errors.NotForceApprover("x"), "You are not in a force-approval group"),
        (errors.OwnerOrAdminRequired("x"), "or an administrator, can revoke it"),
        (errors.NotFound("x"), "This review no longer exists."),
        (
            errors.ReviewClosed("this review is REJECTED and accepts no further decisions"),
            "Already decided: this review is REJECTED and accepts no further decisions.",
        ),
        (
            errors.InvalidRequest("a PENDING review cannot be REVOKED"),
            "That did not go through: a PENDING review cannot be REVOKED.",
        ),
        (RuntimeError("database is locked"), "Something went wrong on our side"),
    ],
)
def test_each_refusal_has_its_words(error, words):
    assert words in refusal_text(error)


def test_internal_details_never_reach_the_clicker():
    assert "database is locked" not in refusal_text(RuntimeError("database is locked"))


def run(awaitable: Awaitable[None]) -> None:
    async def until_done() -> None:
        await awaitable

    asyncio.run(until_done())


def web_client(recording: "RecordingClient") -> AsyncWebClient:
    """The recording client where the bot expects slack_sdk's (it has the methods used)."""
    return cast(AsyncWebClient, recording)


class RecordingClient:
    """Stands in for the Web API client: records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def chat_postEphemeral(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(("chat.postEphemeral", kwargs))
        return {"ok": True}

    async def conversations_open(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(("conversations.open", kwargs))
        return {"ok": True, "channel": {"id": "D0DAN"}}

    async def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:
        self.sent.append(("chat.postMessage", kwargs))
        return {"ok": True}


def test_a_listener_refusal_is_told_in_the_channel_the_click_came_from():
    async def refusing_listener(body, client):
        raise errors.SelfApproval("no")

    client = RecordingClient()
    body = {"user": {"id": "U0RITA"}, "channel": {"id": "C0DBA"}}

    run(replies_with_refusals(refusing_listener)(body=body, client=client))

    [(method, sent)] = client.sent
    assert method == "chat.postEphemeral"
    assert (sent["channel"], sent["user"]) == ("C0DBA", "U0RITA")
    assert "your own session" in sent["text"]


def test_a_refusal_without_a_channel_goes_to_the_direct_message():
    client = RecordingClient()
    body = {"user": {"id": "U0DAN"}, "view": {"type": "home"}}

    run(handle_error(errors.NotAReviewer("no"), body, web_client(client)))

    assert [method for method, _ in client.sent] == ["conversations.open", "chat.postMessage"]
    assert client.sent[1][1]["channel"] == "D0DAN"
