"""The review card's Block Kit: its buttons and what it says, within Slack's limits."""

from collections.abc import Iterator
from typing import Any

import pytest

from bot.actions import ActionId
from bot.blocks import (
    human_duration,
    review_card,
    review_card_text,
    unknown_subcommand_text,
)
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewType
from tests.bot.card_facts import (
    API_URL,
    DECIDED,
    DECIDED_SLACK,
    HOUR_NS,
    REQUESTED_SLACK,
    REVIEW_ID,
    ZWSP,
    buttons,
    facts,
    fields,
    group,
    section_starting,
    texts,
)

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
            "*Reason:*\n> Use the &lt;replica&gt; &amp; retry",
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
                "verbatim": True,
            }
        ],
    }


def test_card_text_is_a_one_line_summary():
    text = review_card_text(facts(status=ReviewStatus.APPROVED, requester_name="Ada & Co"))

    assert text == "Access review APPROVED: Ada &amp; Co on pg-prod"


# --- user text: nothing linked, nothing forged ----------------------------------------------


def mrkdwn_objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn":
            yield node
        for value in node.values():
            yield from mrkdwn_objects(value)
    elif isinstance(node, list):
        for item in node:
            yield from mrkdwn_objects(item)


def test_every_mrkdwn_text_is_verbatim_so_slack_links_nothing_typed():
    card = review_card(
        facts(
            requester_name="@here see https://evil.example #general",
            status=ReviewStatus.REJECTED,
            rejection_reason="visit https://evil.example or ask @channel",
        )
    )

    objects = list(mrkdwn_objects(card))
    assert objects
    assert all(text_object.get("verbatim") is True for text_object in objects)


def test_a_display_name_cannot_forge_a_line_of_the_card():
    card = review_card(
        facts(requester_name="Ada\n*Type*\nadmin access", connection_name="pg\u2028x")
    )

    requester, connection = fields(card)[0], fields(card)[1]
    assert requester.startswith(f"*Requester*\nAda {ZWSP}*Type{ZWSP}* admin access (")
    assert connection == "*Connection*\npg x"
    assert review_card_text(facts(requester_name="a\nb")) == (
        "Access review PENDING: a b on pg-prod"
    )


def test_a_reason_keeps_its_lines_each_quoted():
    card = review_card(
        facts(status=ReviewStatus.REJECTED, rejection_reason="line one\n*Approved* by admin")
    )

    outcome = section_starting(card, ":x:")
    assert outcome.endswith(f"*Reason:*\n> line one\n> {ZWSP}*Approved{ZWSP}* by admin")


def test_an_unknown_subcommand_is_echoed_harmlessly():
    text = unknown_subcommand_text("`<!channel>`\n*bold*")

    assert text.startswith(f"I do not know “{ZWSP}`&lt;!channel&gt;{ZWSP}` {ZWSP}*bold{ZWSP}*”.")


def test_formatting_characters_inside_words_are_left_as_they_are():
    card = review_card(facts(connection_name="pg_prod_eu", requester_name="*Ada* a*b"))

    assert fields(card)[1] == "*Connection*\npg_prod_eu"  # copied from the card, it is the name
    assert fields(card)[0].startswith(f"*Requester*\n{ZWSP}*Ada{ZWSP}* a*b (")
