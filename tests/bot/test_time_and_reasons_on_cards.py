"""What cards and messages say of reasons, origins, deadlines, reminders and ended access."""

from datetime import timedelta

from bot.actions import ActionId
from bot.blocks import (
    access_ended_dm,
    digest_dm,
    home_view,
    reminder_text,
    review_card,
)
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewType
from tests.bot.card_facts import (
    DECIDED,
    DECIDED_SLACK,
    HOUR_NS,
    REQUESTED,
    REQUESTED_SLACK,
    buttons,
    facts,
    texts,
)

PAGE_URL = "https://accessgate.example/reviews/0b5e8a52-8f4e-4c39-9d0e-3a6f1f7c2d11"
EXPIRES = REQUESTED + timedelta(hours=24)
EXPIRES_SLACK = "<!date^1714642200^{date_short_pretty} at {time}|2024-05-02 09:30 UTC>"


def all_text(blocks) -> str:
    return "\n".join(texts(blocks))


def test_the_card_quotes_the_reason_line_by_line():
    card = review_card(facts(reason="INC-42\n*urgent* <!here>"))

    assert "*Why*\n> INC-42\n> \u200b*urgent\u200b* &lt;!here&gt;" in all_text(card)


def test_a_sidecar_filed_card_names_the_sidecar_and_listener_beside_the_connection():
    card = review_card(facts(sidecar_name="edge-1", listener_name="pg"))

    assert "*Connection*\npg-prod\nvia sidecar edge-1, listener pg" in all_text(card)


def test_a_pending_card_shows_its_deadline_and_a_decided_one_does_not():
    pending = all_text(review_card(facts(expires_at=EXPIRES)))
    rejected = all_text(review_card(facts(expires_at=EXPIRES, status=ReviewStatus.REJECTED)))

    assert f"*Expires*\n{EXPIRES_SLACK} unless decided" in pending
    assert "*Expires*" not in rejected


def test_an_expired_card_says_so_and_has_no_buttons():
    card = review_card(
        facts(
            status=ReviewStatus.REJECTED,
            rejection_reason="expired: nobody decided within 1 day",
            ended_at=DECIDED,
        )
    )

    assert f":x: *Rejected* by accessgate {DECIDED_SLACK}" in all_text(card)
    assert "> expired: nobody decided within 1 day" in all_text(card)
    assert buttons(card) == []


def test_a_jit_grant_whose_access_ended_loses_its_revoke_button():
    approved = facts(
        status=ReviewStatus.APPROVED,
        type=ReviewType.JIT,
        revoke_at=DECIDED,
        access_duration_ns=HOUR_NS,
    )
    live = review_card(approved)
    ended = review_card(facts(**{**approved.__dict__, "access_ended": True}))

    assert [b["action_id"] for b in buttons(live)] == [ActionId.REVOKE.value]
    assert buttons(ended) == []
    assert ended[0]["text"]["text"] == ":hourglass: Access review: access ended"
    assert f"*Access ended at*\n{DECIDED_SLACK}" in all_text(ended)


def test_the_card_links_to_the_review_page():
    card = review_card(facts(page_url=PAGE_URL))

    assert f"<{PAGE_URL}|Open the review page>" in all_text(card)


def test_a_reminder_names_the_undecided_groups_and_mentions_their_reviewers():
    text = reminder_text(facts(expires_at=EXPIRES), ["dba", "sre"], ["U0DANA", "<!here>"])

    assert text == (
        f":bell: Still waiting on *dba*, *sre*: <@U0DANA>. Ada Lovelace asked {REQUESTED_SLACK}; "
        f"it expires {EXPIRES_SLACK}."
    )


def test_the_access_ended_message_tells_the_requester_when():
    headline, blocks = access_ended_dm(facts(status=ReviewStatus.APPROVED, revoke_at=DECIDED))

    assert headline == "Your access for pg-prod has ended."
    assert f"It lasted until {DECIDED_SLACK}." in all_text(blocks)


def test_a_digest_lists_every_review_waiting_with_its_buttons():
    headline, blocks = digest_dm([facts(), facts(connection_name="mysql-prod")])

    assert headline == "2 reviews still waiting on you"
    assert "pg-prod" in all_text(blocks)
    assert "mysql-prod" in all_text(blocks)
    assert [b["action_id"] for b in buttons(blocks)] == [
        ActionId.APPROVE.value,
        ActionId.REJECT.value,
    ] * 2


def preference_button(view):
    [button] = [block["accessory"] for block in view["blocks"] if "accessory" in block]
    assert button["action_id"] == ActionId.REMINDERS_BY_DM.value
    return button


def test_the_app_home_offers_the_other_reminder_preference():
    offer_dm = preference_button(home_view([], linked=True, reminders_by_dm=False))
    offer_cards = preference_button(home_view([], linked=True, reminders_by_dm=True))

    assert (offer_dm["value"], offer_dm["text"]["text"]) == ("on", "Send me one digest DM instead")
    assert (offer_cards["value"], offer_cards["text"]["text"]) == (
        "off",
        "Mention me under each card instead",
    )
