"""What a reviewer and a requester see in Slack, rendered from review facts."""

import dataclasses
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.actions import ActionId, ViewId
from bot.blocks import (
    decision_dm,
    help_text,
    home_view,
    human_duration,
    link_instructions,
    modal_context,
    pending_blocks,
    reject_modal,
    rejection_reason_from,
    review_card,
    review_card_text,
    time_window_from,
    time_window_modal,
)
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


# --- buttons --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "force_groups", "expected"),
    [
        (
            ReviewStatus.PENDING,
            (),
            [ActionId.APPROVE, ActionId.REJECT, ActionId.APPROVE_WINDOW],
        ),
        (
            ReviewStatus.PENDING,
            ("sre",),
            [ActionId.APPROVE, ActionId.REJECT, ActionId.APPROVE_WINDOW, ActionId.FORCE_APPROVE],
        ),
        (ReviewStatus.APPROVED, ("sre",), [ActionId.REVOKE]),
        (ReviewStatus.REJECTED, ("sre",), []),
        (ReviewStatus.REVOKED, (), []),
        (ReviewStatus.PROCESSING, (), []),
        (ReviewStatus.EXECUTED, (), []),
        (ReviewStatus.UNKNOWN, (), []),
    ],
)
def test_card_buttons_follow_the_status(status, force_groups, expected):
    blocks = review_card(facts(status=status, force_approval_groups=force_groups))

    assert [button["action_id"] for button in buttons(blocks)] == [str(a) for a in expected]
    actions_blocks = [block for block in blocks if block["type"] == "actions"]
    assert [block["block_id"] for block in actions_blocks] == (
        ["review_actions"] if expected else []
    )


@pytest.mark.parametrize("status", [ReviewStatus.PENDING, ReviewStatus.APPROVED])
def test_every_card_button_carries_the_review_id(status):
    blocks = review_card(facts(status=status, force_approval_groups=("sre",)))

    assert buttons(blocks)
    assert {button["value"] for button in buttons(blocks)} == {str(REVIEW_ID)}


def test_pending_buttons_are_labelled_and_styled():
    blocks = review_card(facts(force_approval_groups=("sre",)))

    shown = [(b["text"]["text"], b.get("style"), "confirm" in b) for b in buttons(blocks)]
    assert shown == [
        ("Approve", "primary", False),
        ("Reject", "danger", False),
        ("Approve with time window", None, False),
        ("Force approve", None, True),
    ]


def test_revoke_asks_for_confirmation():
    [revoke] = buttons(review_card(facts(status=ReviewStatus.APPROVED)))

    assert revoke["text"]["text"] == "Revoke"
    assert revoke["style"] == "danger"
    confirm = revoke["confirm"]
    assert confirm["title"]["text"] == "Revoke access?"
    assert "The session can no longer run" in confirm["text"]["text"]
    assert confirm["confirm"]["text"] == "Revoke"
    assert confirm["deny"]["text"] == "Keep access"


# --- what the card says ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "header"),
    [
        (ReviewStatus.PENDING, ":hourglass_flowing_sand: Access review: pending"),
        (ReviewStatus.APPROVED, ":white_check_mark: Access review: approved"),
        (ReviewStatus.REJECTED, ":x: Access review: rejected"),
        (ReviewStatus.REVOKED, ":no_entry: Access review: revoked"),
        (ReviewStatus.PROCESSING, ":gear: Access review: running"),
        (ReviewStatus.EXECUTED, ":checkered_flag: Access review: executed"),
    ],
)
def test_card_header_shows_the_status(status, header):
    blocks = review_card(facts(status=status))

    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": header, "emoji": True},
    }


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {},
            [
                "*Requester*\nAda Lovelace (ada@example.com)",
                "*Connection*\npg-prod",
                "*Type*\none-time",
                f"*Requested*\n{REQUESTED_SLACK}",
            ],
        ),
        (
            {
                "requester_chat_id": "U0ADA",
                "type": ReviewType.JIT,
                "access_duration_ns": 2 * HOUR_NS,
                "time_window": ("09:00", "17:00"),
            },
            [
                "*Requester*\nAda Lovelace (ada@example.com) <@U0ADA>",
                "*Connection*\npg-prod",
                "*Type*\njust-in-time for 2 hours",
                f"*Requested*\n{REQUESTED_SLACK}",
                "*Time window*\nruns only between 09:00 and 17:00 UTC",
            ],
        ),
        (
            {
                "status": ReviewStatus.APPROVED,
                "type": ReviewType.JIT,
                "access_duration_ns": HOUR_NS // 2,
                "revoke_at": DECIDED,
            },
            [
                "*Requester*\nAda Lovelace (ada@example.com)",
                "*Connection*\npg-prod",
                "*Type*\njust-in-time for 30 minutes",
                f"*Requested*\n{REQUESTED_SLACK}",
                f"*Access until*\n{DECIDED_SLACK}",
            ],
        ),
        (
            # A chat id that is not a plain Slack id must not become markup.
            {"requester_chat_id": "U1>|<!channel", "requester_name": "Eve <b> & co"},
            [
                "*Requester*\nEve &lt;b&gt; &amp; co (ada@example.com)",
                "*Connection*\npg-prod",
                "*Type*\none-time",
                f"*Requested*\n{REQUESTED_SLACK}",
            ],
        ),
    ],
)
def test_card_fields(overrides, expected):
    assert fields(review_card(facts(**overrides))) == expected


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (0, "0 seconds"),
        (45 * 1_000_000_000, "45 seconds"),
        (60 * 1_000_000_000, "1 minute"),
        (HOUR_NS // 2, "30 minutes"),
        (2 * HOUR_NS, "2 hours"),
        (HOUR_NS + HOUR_NS // 2, "1 hour 30 minutes"),
        (26 * HOUR_NS, "1 day 2 hours"),
        (7 * 24 * HOUR_NS, "7 days"),
    ],
)
def test_human_duration(ns, expected):
    assert human_duration(ns) == expected


def test_script_is_escaped_and_cannot_close_its_fence():
    script = "SELECT 1; -- ```\n<script>alert(1)</script> & <@U0BOSS>"

    text = section_starting(review_card(facts(script=script)), "*Script*")

    assert text == (
        "*Script*\n```\n"
        f"SELECT 1; -- `{ZWSP}`{ZWSP}`\n"
        "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;@U0BOSS&gt;"
        "\n```"
    )
    assert text.count("```") == 2


@pytest.mark.parametrize("char", ["x", "&"])
def test_a_huge_script_is_cut_to_fit_and_says_how_much(char):
    blocks = review_card(facts(script=char * 100_000))

    assert all(len(text) <= 3000 for text in texts(blocks))
    text = section_starting(blocks, "*Script*")
    body, note = text.removeprefix("*Script*\n```\n").split("\n```\n")
    rendered = "&amp;" if char == "&" else char
    shown = len(body) // len(rendered)
    assert body == rendered * shown, "the cut must not split an escape"
    assert note == f"_… {100_000 - shown:,} more characters — full script in the API_"
    assert shown > 500


def test_a_script_that_fits_is_not_cut():
    text = section_starting(review_card(facts(script="y" * 2000)), "*Script*")

    assert text == "*Script*\n```\n" + "y" * 2000 + "\n```"


def test_group_lines_say_who_decided_and_when():
    groups = (
        group(
            "dba",
            ReviewStatus.APPROVED,
            reviewed_by_name="Grace Hopper",
            reviewed_by_chat_id="U0GRACE",
            reviewed_at=DECIDED,
            forced=True,
        ),
        group(
            "sec",
            ReviewStatus.REJECTED,
            reviewed_by_name="Linus",
            reviewed_at=DECIDED,
        ),
        group("sre"),
    )

    text = section_starting(review_card(facts(groups=groups, min_approvals=2)), "*Reviewer")

    assert text == (
        "*Reviewer groups* · at least 2 groups must approve\n"
        f"• *dba* — :white_check_mark: approved by <@U0GRACE> {DECIDED_SLACK} (forced)\n"
        f"• *sec* — :x: rejected by Linus {DECIDED_SLACK}\n"
        "• *sre* — :hourglass_flowing_sand: pending"
    )


def test_two_hundred_groups_stay_within_slack_limits():
    groups = tuple(
        group(
            f"reviewers-of-the-production-database-{number:03d}",
            ReviewStatus.APPROVED,
            reviewed_by_name=f"Reviewer number {number}",
            reviewed_at=DECIDED,
        )
        for number in range(200)
    )

    blocks = review_card(facts(groups=groups))

    assert len(blocks) <= 50
    assert all(len(text) <= 3000 for text in texts(blocks))
    lines = section_starting(blocks, "*Reviewer groups*").split("\n")
    shown = [line for line in lines if line.startswith("• ")]
    assert lines[-1] == f"… and {200 - len(shown)} more groups"
    assert shown[0].startswith("• *reviewers-of-the-production-database-000* —")
    assert 0 < len(shown) < 200


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"status": ReviewStatus.REJECTED, "rejection_reason": "Use the <replica> & retry"},
            f":x: *Rejected* by Grace Hopper {DECIDED_SLACK}\n"
            "*Reason:* Use the &lt;replica&gt; &amp; retry",
        ),
        (
            {"status": ReviewStatus.REJECTED},
            f":x: *Rejected* by Grace Hopper {DECIDED_SLACK}\n*Reason:* _no reason given_",
        ),
        (
            {"status": ReviewStatus.REVOKED},
            f":no_entry: *Revoked* by Grace Hopper {DECIDED_SLACK}",
        ),
    ],
)
def test_finished_cards_say_who_ended_them(overrides, expected):
    blocks = review_card(facts(ended_by_name="Grace Hopper", ended_at=DECIDED, **overrides))

    assert section_starting(blocks, ":") == expected


def test_card_links_to_the_api():
    blocks = review_card(facts())

    assert blocks[-1] == {
        "type": "context",
        "elements": [
            {
                "type": "mrkdwn",
                "text": f"<{API_URL}|Open in the API> · review `{REVIEW_ID}`",
            }
        ],
    }


def test_card_text_is_a_one_line_summary():
    text = review_card_text(facts(status=ReviewStatus.APPROVED, requester_name="Ada & Co"))

    assert text == "Access review APPROVED: Ada &amp; Co on pg-prod"


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
            "*Reason:* Ask on the replica",
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


def test_link_instructions():
    text = link_instructions("K7P-2QX", "https://accessgate.example/", 10)

    assert text == (
        "To link your Slack account to accessgate, run this within 10 minutes:\n"
        "```\n"
        "curl -X POST https://accessgate.example/users/me/chat-link "
        '-H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" '
        '-d \'{"code":"K7P-2QX"}\'\n'
        "```\n"
        "or `accessgate chat link K7P-2QX`. The code works once."
    )
