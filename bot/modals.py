"""Block Kit modals: asking for a rejection reason or a time window, reading the answers,
and telling the reviewer how it went inside the modal they are looking at."""

import json
import uuid
from collections.abc import Mapping
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    InputBlock,
    PlainTextInputElement,
    SectionBlock,
    TimePickerElement,
)
from slack_sdk.models.views import View

from bot.actions import (
    REASON_BLOCK,
    REASON_INPUT,
    WINDOW_END_BLOCK,
    WINDOW_END_INPUT,
    WINDOW_START_BLOCK,
    WINDOW_START_INPUT,
    ViewId,
)
from bot.blocks import mrkdwn
from models.reviews.schema import MAX_REJECTION_REASON


def reject_modal(*, review_id: uuid.UUID, channel_id: str | None) -> dict[str, Any]:
    """The modal asking a reviewer why they reject a review."""
    # Optional, as in the API: a reviewer may reject without explaining.
    reason = InputBlock(
        block_id=REASON_BLOCK,
        label="Why are you rejecting this access?",
        hint="The requester sees this reason.",
        optional=True,
        element=PlainTextInputElement(
            action_id=REASON_INPUT, multiline=True, max_length=MAX_REJECTION_REASON
        ),
    )
    return View(
        type="modal",
        callback_id=ViewId.REJECT.value,
        title="Reject access",
        submit="Reject",
        close="Cancel",
        private_metadata=_modal_metadata(review_id, channel_id),
        blocks=[reason],
    ).to_dict()


def time_window_modal(*, review_id: uuid.UUID, channel_id: str | None) -> dict[str, Any]:
    """The modal approving a review that may only run between two UTC clock times."""
    blocks: list[Block] = [
        InputBlock(
            block_id=WINDOW_START_BLOCK,
            label="Runs from",
            element=TimePickerElement(
                action_id=WINDOW_START_INPUT, initial_time="09:00", timezone="UTC"
            ),
        ),
        InputBlock(
            block_id=WINDOW_END_BLOCK,
            label="Until",
            hint="Times are UTC. The window may cross midnight, e.g. from 22:00 until 06:00.",
            element=TimePickerElement(
                action_id=WINDOW_END_INPUT, initial_time="17:00", timezone="UTC"
            ),
        ),
    ]
    return View(
        type="modal",
        callback_id=ViewId.TIME_WINDOW.value,
        title="Approve in a window",
        submit="Approve",
        close="Cancel",
        private_metadata=_modal_metadata(review_id, channel_id),
        blocks=blocks,
    ).to_dict()


def _modal_metadata(review_id: uuid.UUID, channel_id: str | None) -> str:
    return json.dumps({"review_id": str(review_id), "channel_id": channel_id})


def modal_context(view: Mapping[str, Any]) -> tuple[uuid.UUID, str | None]:
    """The review id and channel a submitted modal was opened for; ValueError if malformed."""
    raw = view.get("private_metadata")
    if not isinstance(raw, str):
        raise ValueError("the modal carries no private_metadata")
    try:
        metadata = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"the modal's private_metadata is not JSON: {error}") from error
    if not isinstance(metadata, dict):
        raise ValueError("the modal's private_metadata is not a JSON object")
    review_id, channel_id = metadata.get("review_id"), metadata.get("channel_id")
    if not isinstance(review_id, str):
        raise ValueError("the modal's private_metadata has no review_id")
    if channel_id is not None and not isinstance(channel_id, str):
        raise ValueError("the modal's private_metadata has a channel_id that is not a string")
    try:
        return uuid.UUID(review_id), channel_id
    except ValueError as error:
        raise ValueError(f"the modal's review_id {review_id!r} is not a UUID") from error


def rejection_reason_from(view: Mapping[str, Any]) -> str:
    """The reason typed into a submitted reject modal, "" when left empty."""
    # Slack sends None for an optional input left empty.
    reason = _submitted(view, REASON_BLOCK, REASON_INPUT).get("value")
    if reason is None:
        return ""
    if not isinstance(reason, str):
        raise ValueError("the rejection reason is not text")
    return reason.strip()


def time_window_from(view: Mapping[str, Any]) -> tuple[str, str]:
    """The (start, end) ``HH:MM`` times of a submitted time-window modal; ValueError if missing."""
    start = _submitted(view, WINDOW_START_BLOCK, WINDOW_START_INPUT).get("selected_time")
    end = _submitted(view, WINDOW_END_BLOCK, WINDOW_END_INPUT).get("selected_time")
    if not isinstance(start, str) or not start:
        raise ValueError("the start time of the window is missing")
    if not isinstance(end, str) or not end:
        raise ValueError("the end time of the window is missing")
    return start, end


def _submitted(view: Mapping[str, Any], block_id: str, action_id: str) -> Mapping[str, Any]:
    """One input's submitted state, ``view["state"]["values"][block_id][action_id]``."""
    node: Any = view
    for key in ("state", "values", block_id, action_id):
        if not isinstance(node, Mapping) or key not in node:
            raise ValueError(f"the submitted modal has no {block_id}.{action_id} input")
        node = node[key]
    if not isinstance(node, Mapping):
        raise ValueError(f"the submitted modal has no {block_id}.{action_id} input")
    return node


def notice_modal(*, title: str, text: str) -> dict[str, Any]:
    """A modal that only tells something (a refusal, or what a submission did), with Close."""
    text_block = SectionBlock(text=mrkdwn(text))
    return View(type="modal", title=title[:24], close="Close", blocks=[text_block]).to_dict()
