"""Block Kit for review cards, modals, DMs and the App Home: facts in, Slack dicts out.

Everything here is pure so the Slack handlers stay thin and every message can be tested without
Slack. The slack_sdk model classes are used for their ``to_dict()`` validation, which refuses
text longer than Slack accepts; the budgets below keep user content (scripts, names, reasons)
inside those limits instead of letting a long script break a card.

User content is sent so that it reads as what it is and nothing more. Every mrkdwn text object
is ``verbatim``: Slack links only the links and mentions we write ourselves (``<@U…>``,
``<url|text>``, dates), never a bare URL, ``#channel`` or ``@here`` someone typed into a name or
a reason. ``&``, ``<`` and ``>`` are escaped, so nobody's text can open markup of its own.
Names and labels are one line (line breaks and other control characters become spaces) and
their formatting characters cannot pair up, so a display name such as ``"Ada\n*Type*\nadmin"``
cannot forge a line of the card. Reasons keep their lines, each shown quoted.
"""

import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.actions import (
    REVIEW_ACTIONS_BLOCK,
    ActionId,
)
from models.chat.cards import GroupLine, ReviewCardFacts
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewType
from models.reviews.timing import in_words

SECTION_TEXT_LIMIT = 3000
FIELD_TEXT_LIMIT = 2000
PENDING_LIST_LIMIT = 15
# Names and labels are clipped well below any Slack limit so one odd value cannot crowd out the
# rest of a card.
LABEL_LIMIT = 100
DM_SCRIPT_PREVIEW_LIMIT = 500

STATUS_EMOJI: Mapping[ReviewStatus, str] = {
    ReviewStatus.PENDING: ":hourglass_flowing_sand:",
    ReviewStatus.APPROVED: ":white_check_mark:",
    ReviewStatus.REJECTED: ":x:",
    ReviewStatus.REVOKED: ":no_entry:",
    ReviewStatus.PROCESSING: ":gear:",
    ReviewStatus.EXECUTED: ":checkered_flag:",
    ReviewStatus.UNKNOWN: ":grey_question:",
}
STATUS_WORD: Mapping[ReviewStatus, str] = {status: status.word for status in ReviewStatus}

_MRKDWN_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# A zero-width space before a formatting character keeps it from opening or closing bold,
# italics, strike-through or code: Slack only honours them at a word's edge.
_FORMATTING_CHARACTERS = frozenset("*_~`")
# Inside a ``` block Slack closes the block at the next ```, so a zero-width space goes between
# two backticks in a script; it is invisible and the full script is always in the API.
_ZERO_WIDTH_SPACE = "\u200b"
# Only a plain Slack id becomes a mention: anything else pasted into <@...> could smuggle markup.
_SLACK_ID = re.compile(r"[A-Za-z0-9]+")


# --- small text helpers ---------------------------------------------------------------------


def escape_mrkdwn(text: str) -> str:
    """Escape the three characters Slack mrkdwn treats as control characters."""
    return "".join(_MRKDWN_ESCAPES.get(char, char) for char in text)


def _inline(text: str, index: int) -> str:
    """``text[index]`` as it may appear inside a line of mrkdwn."""
    char = text[index]
    if char in _MRKDWN_ESCAPES:
        return _MRKDWN_ESCAPES[char]
    if char in _FORMATTING_CHARACTERS and not _inside_a_word(text, index):
        # Only at a word's edge can it open or close formatting; inside one (pg_prod, a*b) it
        # is left alone, so names copied from a card are the names.
        return _ZERO_WIDTH_SPACE + char
    if char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
        return " "  # no line breaks, no bidi overrides: a label stays on its own line
    return char


def _inside_a_word(text: str, index: int) -> bool:
    before = text[index - 1] if index > 0 else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    return before.isalnum() and after.isalnum()


def user_text(text: str) -> str:
    """Text someone typed (a command word, a name), safe to echo inside a line of mrkdwn."""
    return "".join(_inline(text, index) for index in range(len(text)))


def human_duration(ns: int) -> str:
    """A nanosecond duration in words, e.g. ``1 day 2 hours``."""
    # Durations are never negative in the database; a card must still render if one were.
    return in_words(timedelta(microseconds=max(ns, 0) // 1000))


def _plural(count: int, unit: str) -> str:
    return f"{count:,} {unit}" if count == 1 else f"{count:,} {unit}s"


def _fit_escaped(text: str, budget: int, *, in_code_block: bool = False) -> tuple[str, int]:
    """Escape ``text`` into at most ``budget`` characters; return it and how many were cut."""
    # Escaping grows text, so the cut is made on the escaped form, never inside an entity.
    pieces: list[str] = []
    used = 0
    for index, char in enumerate(text):
        if in_code_block:  # nothing is formatted inside ```, but ``` itself would close it
            piece = _MRKDWN_ESCAPES.get(char, char)
            if char == "`" and text[index + 1 : index + 2] == "`":
                piece += _ZERO_WIDTH_SPACE
        else:
            piece = _inline(text, index)
        if used + len(piece) > budget:
            return "".join(pieces), len(text) - index
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces), 0


def _label(text: str, limit: int = LABEL_LIMIT) -> str:
    """User-supplied text escaped for mrkdwn and clipped to ``limit`` characters."""
    rendered, cut = _fit_escaped(text, limit)
    if not cut:
        return rendered
    rendered, _ = _fit_escaped(text, limit - 1)
    return rendered + "…"


def _person(name: str | None, chat_id: str | None) -> str:
    if chat_id and _SLACK_ID.fullmatch(chat_id):
        return f"<@{chat_id}>"
    return _label(name) if name else "someone"


def _slack_date(moment: datetime) -> str:
    """A date every reader sees in their own time zone, with a UTC fallback."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    fallback = aware.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(aware.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def _review_type(facts: ReviewCardFacts) -> str:
    if facts.type is ReviewType.JIT:
        return f"just-in-time for {human_duration(facts.access_duration_ns)}"
    return "one-time"


def _time_window(window: tuple[str, str]) -> str:
    start, end = window
    return f"runs only between {_label(start)} and {_label(end)} UTC"


def _script_text(script: str, *, heading: str, limit: int) -> str:
    """The script in a code block, cut to fit ``limit`` characters with a note of what is left."""
    if not script:
        return f"{heading}\n_The script is empty._"
    opening, closing = f"{heading}\n```\n", "\n```"
    budget = limit - len(opening) - len(closing)
    body, cut = _fit_escaped(script, budget, in_code_block=True)
    if cut:
        # Reserve room for the note, sized for the largest count it could show.
        budget -= len(_cut_note(len(script)))
        body, cut = _fit_escaped(script, budget, in_code_block=True)
    return f"{opening}{body}{closing}" + (_cut_note(cut) if cut else "")


def _cut_note(cut: int) -> str:
    return f"\n_… {cut:,} more characters — full script in the API_"


def _api_context(facts: ReviewCardFacts) -> dict[str, Any]:
    if facts.page_url:
        link = f"<{escape_mrkdwn(facts.page_url)}|Open the review page>"
    else:
        link = f"<{escape_mrkdwn(facts.api_url)}|Open in the API>"
    return ContextBlock(elements=[mrkdwn(f"{link} · review `{facts.review_id}`")]).to_dict()


def _section(text: str) -> dict[str, Any]:
    return SectionBlock(text=mrkdwn(text)).to_dict()


def mrkdwn(text: str) -> MarkdownTextObject:
    """A mrkdwn text object in which Slack links nothing we did not write as a link."""
    return MarkdownTextObject(text=text, verbatim=True)


# --- the review card ------------------------------------------------------------------------


def review_card(facts: ReviewCardFacts) -> list[dict[str, Any]]:
    """The card posted to reviewer channels, rewritten from the current facts on every change."""
    emoji, word = STATUS_EMOJI[facts.status], STATUS_WORD[facts.status]
    if facts.access_ended:
        emoji, word = ":hourglass:", "access ended"
    title = PlainTextObject(text=f"{emoji} Access review: {word}", emoji=True)
    blocks: list[dict[str, Any]] = [
        HeaderBlock(text=title).to_dict(),
        SectionBlock(fields=_card_fields(facts)).to_dict(),
    ]
    if facts.reason:
        blocks.append(_section(_request_reason_text(facts.reason)))
    blocks += [
        _section(_script_text(facts.script, heading="*Script*", limit=SECTION_TEXT_LIMIT)),
        _section(_groups_text(facts)),
    ]
    outcome = _outcome_text(facts)
    if outcome:
        blocks.append(_section(outcome))
    buttons = _card_buttons(facts)
    if buttons:
        blocks.append(ActionsBlock(block_id=REVIEW_ACTIONS_BLOCK, elements=buttons).to_dict())
    blocks.append(_api_context(facts))
    return blocks


def review_card_text(facts: ReviewCardFacts) -> str:
    """The plain notification text of a card, e.g. ``Access review PENDING: Ada on pg-prod``."""
    return (
        f"Access review {facts.status.value}: {_label(facts.requester_name)} "
        f"on {_label(facts.connection_name)}"
    )


def _card_fields(facts: ReviewCardFacts) -> list[MarkdownTextObject]:
    requester = f"{_label(facts.requester_name)} ({_label(facts.requester_email)})"
    if facts.requester_chat_id and _SLACK_ID.fullmatch(facts.requester_chat_id):
        requester += f" <@{facts.requester_chat_id}>"
    connection = _label(facts.connection_name)
    if facts.sidecar_name:
        # Where the statement was intercepted: which sidecar, on which of its listeners.
        connection += f"\nvia sidecar {_label(facts.sidecar_name)}"
        if facts.listener_name:
            connection += f", listener {_label(facts.listener_name)}"
    fields = [
        f"*Requester*\n{requester}",
        f"*Connection*\n{connection}",
        f"*Type*\n{_review_type(facts)}",
        f"*Requested*\n{_slack_date(facts.created_at)}",
    ]
    if facts.time_window is not None:
        fields.append(f"*Time window*\n{_time_window(facts.time_window)}")
    if facts.status is ReviewStatus.PENDING and facts.expires_at is not None:
        fields.append(f"*Expires*\n{_slack_date(facts.expires_at)} unless decided")
    if facts.status is ReviewStatus.APPROVED and facts.revoke_at is not None:
        heading = "Access ended at" if facts.access_ended else "Access until"
        fields.append(f"*{heading}*\n{_slack_date(facts.revoke_at)}")
    return [mrkdwn(field) for field in fields]


def _request_reason_text(reason: str) -> str:
    """The requester's reason, every line quoted, under its heading."""
    return _quoted("*Why*", reason, SECTION_TEXT_LIMIT)


def _groups_text(facts: ReviewCardFacts) -> str:
    """Every group's line in one section, so many groups cannot exceed the 50-block limit."""
    heading = "*Reviewer groups*"
    if facts.min_approvals:
        heading += f" · at least {_plural(facts.min_approvals, 'group')} must approve"
    lines = [_group_line(group) for group in facts.groups] or ["_No reviewer groups._"]
    full = "\n".join([heading, *lines])
    if len(full) <= SECTION_TEXT_LIMIT:
        return full
    budget = SECTION_TEXT_LIMIT - len(_more_groups_note(len(lines)))
    shown = [heading]
    used = len(heading)
    for line in lines:
        if used + 1 + len(line) > budget:
            break
        shown.append(line)
        used += 1 + len(line)
    return "\n".join(shown) + _more_groups_note(len(lines) - (len(shown) - 1))


def _more_groups_note(hidden: int) -> str:
    return f"\n… and {_plural(hidden, 'more group')}"


def _group_line(group: GroupLine) -> str:
    line = f"• *{_label(group.group)}* — {STATUS_EMOJI[group.status]} {STATUS_WORD[group.status]}"
    if group.reviewed_by_name or group.reviewed_by_chat_id:
        line += f" by {_person(group.reviewed_by_name, group.reviewed_by_chat_id)}"
    if group.reviewed_at is not None:
        line += f" {_slack_date(group.reviewed_at)}"
    if group.forced:
        line += " (forced)"
    return line


def _outcome_text(facts: ReviewCardFacts) -> str | None:
    """Who ended a rejected or revoked review, when, and why."""
    if facts.status not in (ReviewStatus.REJECTED, ReviewStatus.REVOKED):
        return None
    text = f"{STATUS_EMOJI[facts.status]} *{STATUS_WORD[facts.status].capitalize()}*"
    if facts.ended_by_name:
        text += f" by {_label(facts.ended_by_name)}"
    elif facts.rejection_reason and facts.rejection_reason.startswith("expired"):
        text += " by accessgate"
    if facts.ended_at is not None:
        text += f" {_slack_date(facts.ended_at)}"
    if facts.status is ReviewStatus.REJECTED:
        text += "\n" + _reason_text(facts.rejection_reason, SECTION_TEXT_LIMIT - len(text) - 1)
    return text


def _reason_text(reason: str | None, limit: int) -> str:
    """The reason under its heading, every line of it quoted: it cannot pass for card lines."""
    if not reason:
        return "*Reason:* _no reason given_"
    return _quoted("*Reason:*", reason, limit)


def _quoted(heading: str, text: str, limit: int) -> str:
    """``text`` under ``heading``, each line quoted, within ``limit`` characters."""
    lines, used = [heading], len(heading)
    for line in text.splitlines() or [""]:
        quoted = "\n> " + _label(line, max(limit - used - 3, 1))
        if used + len(quoted) > limit:
            break
        lines.append(quoted)
        used += len(quoted)
    return "".join(lines)


def _card_buttons(facts: ReviewCardFacts) -> list[ButtonElement]:
    value = str(facts.review_id)
    if facts.status is ReviewStatus.PENDING:
        buttons = [
            *_decision_buttons(value),
            ButtonElement(
                text="Approve with time window",
                action_id=ActionId.APPROVE_WINDOW.value,
                value=value,
            ),
        ]
        if facts.force_approval_groups:
            buttons.append(_force_approve_button(value))
        return buttons
    if facts.status is ReviewStatus.APPROVED and not facts.access_ended:
        return [_revoke_button(value)]
    return []


def _decision_buttons(value: str) -> list[ButtonElement]:
    # One pair per review, not per group: a decision applies to every group the clicker is in.
    return [
        ButtonElement(
            text="Approve", action_id=ActionId.APPROVE.value, value=value, style="primary"
        ),
        ButtonElement(text="Reject", action_id=ActionId.REJECT.value, value=value, style="danger"),
    ]


def _force_approve_button(value: str) -> ButtonElement:
    return ButtonElement(
        text="Force approve",
        action_id=ActionId.FORCE_APPROVE.value,
        value=value,
        confirm=ConfirmObject(
            title="Force approve?",
            text=(
                "This approves the review for every reviewer group at once, whatever the other "
                "groups decide. Only members of a force-approval group can do this."
            ),
            confirm="Force approve",
            deny="Cancel",
            style="danger",
        ),
    )


def _revoke_button(value: str) -> ButtonElement:
    return ButtonElement(
        text="Revoke",
        action_id=ActionId.REVOKE.value,
        value=value,
        style="danger",
        confirm=ConfirmObject(
            title="Revoke access?",
            text="The session can no longer run once its access is revoked. This cannot be undone.",
            confirm="Revoke",
            deny="Keep access",
            style="danger",
        ),
    )


# --- messages to the requester --------------------------------------------------------------


def decision_dm(facts: ReviewCardFacts) -> tuple[str, list[dict[str, Any]]]:
    """The DM telling a requester their review was approved, rejected or revoked."""
    connection = _label(facts.connection_name)
    emoji = STATUS_EMOJI[facts.status]
    by = f" by {_label(facts.ended_by_name)}" if facts.ended_by_name else ""
    if facts.status is ReviewStatus.APPROVED:
        headline = f"Your access review for {connection} was approved."
        message = f"{emoji} {headline}" + "".join(f"\n{line}" for line in _approval_terms(facts))
    elif facts.status is ReviewStatus.REJECTED:
        headline = f"Your access review for {connection} was rejected{by}."
        message = f"{emoji} {headline}\n"
        message += _reason_text(facts.rejection_reason, SECTION_TEXT_LIMIT - len(message))
    elif facts.status is ReviewStatus.REVOKED:
        headline = f"Your access for {connection} was revoked{by}."
        message = f"{emoji} {headline} The session can no longer run."
    else:
        raise ValueError(f"a {facts.status.value} review has no decision to tell its requester")
    script = _script_text(facts.script, heading="*Script*", limit=DM_SCRIPT_PREVIEW_LIMIT)
    return headline, [_section(message), _section(script), _api_context(facts)]


def _approval_terms(facts: ReviewCardFacts) -> list[str]:
    terms: list[str] = []
    if facts.time_window is not None:
        terms.append(f"It {_time_window(facts.time_window)}.")
    if facts.type is ReviewType.JIT:
        if facts.revoke_at is not None:
            terms.append(f"Your access lasts until {_slack_date(facts.revoke_at)}.")
        else:
            terms.append(f"Your access lasts {human_duration(facts.access_duration_ns)}.")
    return terms


def access_ended_dm(facts: ReviewCardFacts) -> tuple[str, list[dict[str, Any]]]:
    """The DM telling a requester their just-in-time access has ended."""
    headline = f"Your access for {_label(facts.connection_name)} has ended."
    message = f":hourglass: {headline}"
    if facts.revoke_at is not None:
        message += f" It lasted until {_slack_date(facts.revoke_at)}."
    message += " Open a new session to ask again."
    return headline, [_section(message), _api_context(facts)]


# --- reminders --------------------------------------------------------------------------------


def reminder_text(facts: ReviewCardFacts, groups: Sequence[str], mentions: Sequence[str]) -> str:
    """The reply under a card: which groups still have to decide, and who is in them."""
    people = " ".join(f"<@{chat_id}>" for chat_id in mentions if _SLACK_ID.fullmatch(chat_id))
    names = ", ".join(f"*{_label(group)}*" for group in groups) or "its reviewers"
    text = f":bell: Still waiting on {names}"
    if people:
        text += f": {people}"
    text += f". {_label(facts.requester_name)} asked {_slack_date(facts.created_at)}"
    if facts.expires_at is not None:
        text += f"; it expires {_slack_date(facts.expires_at)}"
    return text[:SECTION_TEXT_LIMIT] + "."


def digest_dm(facts_list: Sequence[ReviewCardFacts]) -> tuple[str, list[dict[str, Any]]]:
    """A reviewer's one direct message about every review still waiting on them."""
    count = len(facts_list)  # the list read holds one more than it shows, at most
    if count > PENDING_LIST_LIMIT:
        headline = f"More than {PENDING_LIST_LIMIT} reviews still waiting on you"
    else:
        headline = f"{_plural(count, 'review')} still waiting on you"
    return headline, [_section(f":bell: *{headline}*"), *pending_blocks(facts_list)[1:]]


# --- the pending list and the App Home ------------------------------------------------------


def pending_blocks(facts_list: Sequence[ReviewCardFacts]) -> list[dict[str, Any]]:
    """The reviews waiting on a reviewer, a compact line and Approve/Reject buttons each."""
    if not facts_list:
        return [_section("Nothing is waiting on you. :tada:")]
    blocks = [_section(f"*{_plural(len(facts_list), 'review')} waiting on you*")]
    # Two blocks per review keeps 15 of them well under Slack's 50-block message limit.
    for facts in facts_list[:PENDING_LIST_LIMIT]:
        blocks.append(_section(_pending_line(facts)))
        blocks.append(
            ActionsBlock(
                block_id=f"pending_review:{facts.review_id}",
                elements=_decision_buttons(str(facts.review_id)),
            ).to_dict()
        )
    hidden = len(facts_list) - PENDING_LIST_LIMIT
    if hidden > 0:
        reviews_url = _reviews_list_url(facts_list[0])
        blocks.append(_section(f"…and {hidden:,} more — see <{reviews_url}|the API>"))
    return blocks


def _pending_line(facts: ReviewCardFacts) -> str:
    return (
        f"*{_label(facts.requester_name)}* on *{_label(facts.connection_name)}* · "
        f"{_review_type(facts)} · requested {_slack_date(facts.created_at)} · "
        f"<{escape_mrkdwn(facts.page_url or facts.api_url)}|details>"
    )


def _reviews_list_url(facts: ReviewCardFacts) -> str:
    # api_url is ".../reviews/<id>"; the list of reviews is its parent.
    return escape_mrkdwn(facts.api_url.removesuffix(f"/{facts.review_id}"))


def home_view(
    facts_list: Sequence[ReviewCardFacts], *, linked: bool, reminders_by_dm: bool = False
) -> dict[str, Any]:
    """The App Home: the reviews waiting on the user and their reminder preference, or how to
    link their account."""
    header = HeaderBlock(text="Access reviews").to_dict()
    if linked:
        body = [*pending_blocks(facts_list), _reminder_preference(reminders_by_dm)]
    else:
        body = [
            _section(
                "Your Slack account is not linked to accessgate yet. Type `/accessgate link` in "
                "any channel and follow the instructions; reviews waiting on you then show here."
            )
        ]
    return View(type="home", blocks=[header, *body]).to_dict()


def _reminder_preference(by_dm: bool) -> dict[str, Any]:
    if by_dm:
        text = "*Reminders:* one direct message listing what waits on you, once an interval."
        button = ButtonElement(
            text="Mention me under each card instead",
            action_id=ActionId.REMINDERS_BY_DM.value,
            value="off",
        )
    else:
        text = "*Reminders:* a mention under each card still waiting on your group."
        button = ButtonElement(
            text="Send me one digest DM instead",
            action_id=ActionId.REMINDERS_BY_DM.value,
            value="on",
        )
    return SectionBlock(text=mrkdwn(text), accessory=button).to_dict()


def unknown_subcommand_text(subcommand: str) -> str:
    """The answer to ``/accessgate <something we do not know>``, quoting it harmlessly."""
    return f"I do not know “{_label(subcommand, 40)}”.\n{help_text()}"


def help_text() -> str:
    """The answer to ``/accessgate`` and ``/accessgate help``."""
    return (
        "*accessgate* reviews access to gateway connections.\n"
        "`/accessgate link` — link your Slack account to your accessgate user\n"
        "`/accessgate pending` — list the reviews waiting on you\n"
        "`/accessgate help` — show this help"
    )


def link_instructions(code: str, link_url: str, expires_minutes: int) -> str:
    """How to link a Slack account with a one-time code: the page, or the command line."""
    return (
        f"<{escape_mrkdwn(link_url)}|Link your Slack account to accessgate> within "
        f"{_plural(expires_minutes, 'minute')}: sign in and confirm.\n"
        f"From a terminal signed in with `accessgate login`: "
        f"`accessgate chat link {escape_mrkdwn(code)}`. The link and the code work once."
    )
