"""Review card facts for the Block Kit tests, and ways to read what the builders return."""

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from models.chat.cards import GroupLine, ReviewCardFacts
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewType

REVIEW_ID = uuid.UUID("0b5e8a52-8f4e-4c39-9d0e-3a6f1f7c2d11")
API_URL = f"https://accessgate.example/reviews/{REVIEW_ID}"
REQUESTED = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
REQUESTED_SLACK = "<!date^1714555800^{date_short_pretty} at {time}|2024-05-01 09:30 UTC>"
DECIDED = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
DECIDED_SLACK = "<!date^1714557600^{date_short_pretty} at {time}|2024-05-01 10:00 UTC>"
HOUR_NS = 3_600 * 1_000_000_000
ZWSP = "\u200b"


def group(name: str = "dba", status: ReviewStatus = ReviewStatus.PENDING, **overrides: Any):
    line = GroupLine(
        group=name,
        status=status,
        reviewed_by_name=None,
        reviewed_by_chat_id=None,
        reviewed_at=None,
        forced=False,
    )
    return dataclasses.replace(line, **overrides)


def facts(**overrides: Any) -> ReviewCardFacts:
    review_id = overrides.pop("review_id", REVIEW_ID)
    base = ReviewCardFacts(
        review_id=review_id,
        session_id=uuid.UUID("7d1c2a8e-3f0b-4f6e-8b1a-5c9d0e2f4a66"),
        organization_id=uuid.UUID("1b9e6f2c-0a4d-4c8e-9f3b-7e5d2a1c6b80"),
        requester_id=uuid.UUID("4c2a9d7e-6b1f-4e3a-8d5c-0f9b7a2e1d34"),
        status=ReviewStatus.PENDING,
        type=ReviewType.ONETIME,
        access_duration_ns=HOUR_NS // 2,
        requester_name="Ada Lovelace",
        requester_email="ada@example.com",
        requester_chat_id=None,
        connection_name="pg-prod",
        script="SELECT 1;",
        created_at=REQUESTED,
        groups=(group("dba"),),
        force_approval_groups=(),
        min_approvals=None,
        time_window=None,
        rejection_reason=None,
        revoke_at=None,
        ended_by_name=None,
        ended_at=None,
        api_url=f"https://accessgate.example/reviews/{review_id}",
    )
    return dataclasses.replace(base, **overrides)


def buttons(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        element for block in blocks if block["type"] == "actions" for element in block["elements"]
    ]


def texts(node: Any) -> Iterator[str]:
    """Every text object's text anywhere in a Block Kit structure."""
    if isinstance(node, dict):
        if node.get("type") in ("mrkdwn", "plain_text") and isinstance(node.get("text"), str):
            yield node["text"]
        for value in node.values():
            yield from texts(value)
    elif isinstance(node, list):
        for item in node:
            yield from texts(item)


def section_starting(blocks: list[dict[str, Any]], prefix: str) -> str:
    found = [
        block["text"]["text"]
        for block in blocks
        if block["type"] == "section"
        and "text" in block
        and block["text"]["text"].startswith(prefix)
    ]
    assert len(found) == 1, f"expected one section starting {prefix!r}, got {found}"
    return found[0]


def fields(blocks: list[dict[str, Any]]) -> list[str]:
    return [field["text"] for block in blocks for field in block.get("fields", [])]


def submitted(modal: dict[str, Any], answers: list[str | None]) -> dict[str, Any]:
    """The view Slack sends on submission, keyed by the ids the modal itself declares."""
    values: dict[str, Any] = {}
    for block, answer in zip(modal["blocks"], answers, strict=True):
        element = block["element"]
        if element["type"] == "timepicker":
            state = {"type": "timepicker", "selected_time": answer}
        else:
            state = {"type": element["type"], "value": answer}
        values[block["block_id"]] = {element["action_id"]: state}
    return {
        "type": "modal",
        "callback_id": modal["callback_id"],
        "private_metadata": modal["private_metadata"],
        "state": {"values": values},
    }
