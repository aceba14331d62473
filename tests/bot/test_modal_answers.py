"""A modal's decision is answered in its acknowledgement, or after it when the decision is slow."""

import asyncio
import json
import uuid
from typing import Any, cast

from slack_sdk.web.async_client import AsyncWebClient

from bot import listeners
from models.core import errors
from models.reviews.machine import Decision
from models.reviews.schema import ReviewDecisionRequest

VIEW = {"id": "V1", "title": {"type": "plain_text", "text": "Reject"}}
BODY = {"view": VIEW, "user": {"id": "U0DAN"}}
REQUEST = ReviewDecisionRequest(status=Decision.REJECTED, rejection_reason="no ticket")


class Recorder:
    """Records, in order, what reached Slack: acknowledgements and views.update calls."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []
        self.acked = asyncio.Event()

    async def ack(self, **answer: Any) -> None:
        self.said.append(("ack", json.dumps(answer["view"], ensure_ascii=False)))
        self.acked.set()

    async def views_update(self, *, view_id: str, view: dict[str, Any]) -> None:
        assert view_id == "V1"
        self.said.append(("views.update", json.dumps(view, ensure_ascii=False)))


def decide(recorder: Recorder) -> None:
    asyncio.run(
        listeners._decide_in_modal(
            recorder.ack,  # type: ignore[arg-type]
            cast(Any, {}),
            cast(AsyncWebClient, recorder),
            BODY,
            uuid.uuid4(),
            REQUEST,
            done=listeners.REJECTED,
        )
    )


def test_a_quick_decision_is_answered_in_the_acknowledgement(monkeypatch):
    async def quick(*_args: Any) -> None:
        return None

    monkeypatch.setattr(listeners, "_decide_review", quick)
    recorder = Recorder()

    decide(recorder)

    assert [where for where, _ in recorder.said] == ["ack"]
    assert "Rejected." in recorder.said[0][1]


def test_a_quick_refusal_is_answered_in_the_acknowledgement(monkeypatch):
    async def refused(*_args: Any) -> None:
        raise errors.ReviewClosed("this review is APPROVED and accepts no further decisions")

    monkeypatch.setattr(listeners, "_decide_review", refused)
    recorder = Recorder()

    decide(recorder)

    assert [where for where, _ in recorder.said] == ["ack"]
    assert "accepts no further decisions" in recorder.said[0][1]


def test_a_slow_decision_is_acknowledged_as_working_then_answered(monkeypatch):
    recorder = Recorder()

    async def slow(*_args: Any) -> None:
        await recorder.acked.wait()  # decided only once Slack heard "working"

    monkeypatch.setattr(listeners, "_decide_review", slow)
    monkeypatch.setattr(listeners, "MODAL_ANSWER_SECONDS", 0)

    decide(recorder)

    assert [where for where, _ in recorder.said] == ["ack", "views.update"]
    assert listeners.WORKING in recorder.said[0][1]
    assert "Rejected." in recorder.said[1][1]
