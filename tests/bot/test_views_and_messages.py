"""Modals, messages to the requester, the pending list and the App Home, as Block Kit."""

import json
import uuid

import pytest

from bot.actions import ActionId, ViewId
from bot.blocks import decision_dm, help_text, home_view, link_instructions, pending_blocks
from bot.modals import (
    modal_context,
    notice_modal,
    reject_modal,
    rejection_reason_from,
    time_window_from,
    time_window_modal,
)
from models.chat.cards import ReviewCardFacts
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewType
from tests.bot.card_facts import (
    API_URL,
    DECIDED,
    DECIDED_SLACK,
    HOUR_NS,
    REQUESTED_SLACK,
    REVIEW_ID,
    buttons,
    facts,
    submitted,
    texts,
)

# --- modals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("channel_id", ["C0REVIEWS", None])
def test_reject_modal_round_trip(channel_id):
    modal = reject_modal(review_id=REVIEW_ID, channel_id=channel_id)

    assert modal["type"] == "modal"
    assert modal["callback_id"] == ViewId.REJECT.value == "review.reject_reason"
    assert modal["submit"]["text"] == "Reject"
    assert modal["close"]["text"] == "Cancel"
    [reason_input] = [block["element"] for block in modal["blocks"]]
    assert reason_input["type"] == "plain_text_input"
    assert reason_input["multiline"] is True
    assert reason_input["max_length"] == 1000

    view = submitted(modal, ["  The replica has this data.  "])

    assert modal_context(view) == (REVIEW_ID, channel_id)
    assert rejection_reason_from(view) == "The replica has this data."


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_the_rejection_reason_may_be_left_empty(reason):
    modal = reject_modal(review_id=REVIEW_ID, channel_id=None)
    view = submitted(modal, [reason])

    assert modal["blocks"][0]["optional"] is True
    assert rejection_reason_from(view) == ""


def test_time_window_modal_round_trip():
    modal = time_window_modal(review_id=REVIEW_ID, channel_id="C0REVIEWS")

    assert modal["callback_id"] == ViewId.TIME_WINDOW.value == "review.time_window"
    assert modal["submit"]["text"] == "Approve"
    assert [block["element"]["type"] for block in modal["blocks"]] == ["timepicker"] * 2
    assert "UTC" in modal["blocks"][1]["hint"]["text"]
    assert "midnight" in modal["blocks"][1]["hint"]["text"]

    view = submitted(modal, ["22:00", "06:00"])

    assert modal_context(view) == (REVIEW_ID, "C0REVIEWS")
    assert time_window_from(view) == ("22:00", "06:00")


@pytest.mark.parametrize(
    ("answers", "which"),
    [([None, "17:00"], "start"), (["09:00", None], "end")],
)
def test_a_missing_time_is_named(answers, which):
    view = submitted(time_window_modal(review_id=REVIEW_ID, channel_id=None), answers)

    with pytest.raises(ValueError, match=f"the {which} time of the window is missing"):
        time_window_from(view)


def test_a_view_without_the_expected_input_is_refused():
    view = submitted(reject_modal(review_id=REVIEW_ID, channel_id=None), ["why"])

    with pytest.raises(ValueError, match="window_start"):
        time_window_from(view)


@pytest.mark.parametrize(
    "view",
    [
        {},
        {"private_metadata": None},
        {"private_metadata": ""},
        {"private_metadata": "not json"},
        {"private_metadata": "[1, 2]"},
        {"private_metadata": json.dumps({"channel_id": "C1"})},
        {"private_metadata": json.dumps({"review_id": 7, "channel_id": "C1"})},
        {"private_metadata": json.dumps({"review_id": "nope", "channel_id": "C1"})},
        {"private_metadata": json.dumps({"review_id": str(REVIEW_ID), "channel_id": 5})},
    ],
)
def test_malformed_private_metadata_is_refused(view):
    with pytest.raises(ValueError, match=r"private_metadata|review_id"):
        modal_context(view)


def test_a_notice_modal_only_tells_and_closes():
    modal = notice_modal(title="Not allowed to do that", text="You are not a reviewer.")

    assert modal["type"] == "modal"
    assert modal["title"]["text"] == "Not allowed to do that"[:24]
    assert modal["close"]["text"] == "Close"
    assert "submit" not in modal
    assert modal["blocks"][0]["text"]["text"] == "You are not a reviewer."


# --- messages to the requester --------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "text", "message"),
    [
        (
            {"status": ReviewStatus.APPROVED},
            "Your access review for pg-prod was approved.",
            ":white_check_mark: Your access review for pg-prod was approved.",
        ),
        (
            {
                "status": ReviewStatus.APPROVED,
                "type": ReviewType.JIT,
                "time_window": ("22:00", "06:00"),
                "revoke_at": DECIDED,
            },
            "Your access review for pg-prod was approved.",
            ":white_check_mark: Your access review for pg-prod was approved.\n"
            "It runs only between 22:00 and 06:00 UTC.\n"
            f"Your access lasts until {DECIDED_SLACK}.",
        ),
        (
            {
                "status": ReviewStatus.REJECTED,
                "ended_by_name": "Grace Hopper",
                "rejection_reason": "Ask on the replica",
            },
            "Your access review for pg-prod was rejected by Grace Hopper.",
            ":x: Your access review for pg-prod was rejected by Grace Hopper.\n"
            "*Reason:*\n> Ask on the replica",
        ),
        (
            {"status": ReviewStatus.REJECTED, "ended_by_name": "Grace Hopper"},
            "Your access review for pg-prod was rejected by Grace Hopper.",
            ":x: Your access review for pg-prod was rejected by Grace Hopper.\n"
            "*Reason:* _no reason given_",
        ),
        (
            {"status": ReviewStatus.REVOKED, "ended_by_name": "Grace Hopper"},
            "Your access for pg-prod was revoked by Grace Hopper.",
            ":no_entry: Your access for pg-prod was revoked by Grace Hopper. "
            "The session can no longer run.",
        ),
    ],
)
def test_decision_dm(overrides, text, message):
    dm_text, blocks = decision_dm(facts(script="DELETE FROM t;\n" * 100, **overrides))

    assert dm_text == text
    assert blocks[0]["text"]["text"] == message
    preview = blocks[1]["text"]["text"]
    assert preview.startswith("*Script*\n```\nDELETE FROM t;\n")
    assert len(preview) <= 500
    assert "more characters — full script in the API" in preview
    assert API_URL in blocks[2]["elements"][0]["text"]


@pytest.mark.parametrize("status", [ReviewStatus.PENDING, ReviewStatus.EXECUTED])
def test_no_decision_dm_without_a_decision(status):
    with pytest.raises(ValueError, match="no decision"):
        decision_dm(facts(status=status))


# --- the pending list and home --------------------------------------------------------------


def many(count: int) -> list[ReviewCardFacts]:
    return [
        facts(review_id=uuid.UUID(int=number + 1), requester_name=f"Requester {number}")
        for number in range(count)
    ]


def test_nothing_pending():
    assert list(texts(pending_blocks([]))) == ["Nothing is waiting on you. :tada:"]


def test_pending_list_shows_each_review_with_its_buttons():
    reviews = [
        facts(),
        facts(
            review_id=uuid.UUID(int=2),
            type=ReviewType.JIT,
            access_duration_ns=HOUR_NS,
            connection_name="mysql-billing",
        ),
    ]

    blocks = pending_blocks(reviews)

    assert blocks[0]["text"]["text"] == "*2 reviews waiting on you*"
    assert blocks[1]["text"]["text"] == (
        f"*Ada Lovelace* on *pg-prod* · one-time · requested {REQUESTED_SLACK} · "
        f"<{API_URL}|details>"
    )
    assert blocks[3]["text"]["text"].startswith(
        "*Ada Lovelace* on *mysql-billing* · just-in-time for 1 hour · "
    )
    assert [(b["action_id"], b["value"]) for b in buttons(blocks)] == [
        (ActionId.APPROVE, str(REVIEW_ID)),
        (ActionId.REJECT, str(REVIEW_ID)),
        (ActionId.APPROVE, str(uuid.UUID(int=2))),
        (ActionId.REJECT, str(uuid.UUID(int=2))),
    ]


def test_pending_list_caps_at_fifteen():
    blocks = pending_blocks(many(40))

    assert len(blocks) <= 50
    assert len(buttons(blocks)) == 15 * 2
    assert blocks[0]["text"]["text"] == "*40 reviews waiting on you*"
    assert blocks[-1]["text"]["text"] == (
        "…and 25 more — see <https://accessgate.example/reviews|the API>"
    )


def test_home_view_shows_pending_reviews_when_linked():
    view = home_view(many(3), linked=True)

    assert view["type"] == "home"
    assert view["blocks"][0]["text"]["text"] == "Access reviews"
    assert view["blocks"][1]["text"]["text"] == "*3 reviews waiting on you*"
    assert len(buttons(view["blocks"])) == 6


def test_home_view_explains_linking_when_not_linked():
    view = home_view([], linked=False)

    assert buttons(view["blocks"]) == []
    assert "Type `/accessgate link`" in view["blocks"][1]["text"]["text"]


def test_help_names_every_command():
    text = help_text()

    for command in ("/accessgate link", "/accessgate pending", "/accessgate help"):
        assert f"`{command}`" in text


def test_link_instructions_open_the_link_page_and_name_the_cli_command():
    url = "https://accessgate.example/chat/link?code=K7P2QX"
    text = link_instructions("K7P2QX", url, 10)

    assert text == (
        f"<{url}|Link your Slack account to accessgate> within 10 minutes: sign in and confirm.\n"
        "From a terminal signed in with `accessgate login`: `accessgate chat link K7P2QX`. "
        "The link and the code work once."
    )
