"""The one place where what went wrong becomes words for the person who clicked in Slack.

Listeners never word a refusal themselves: they raise (or let through) the domain error, and
the app's error handler answers with ``refusal_text`` in an ephemeral message.
"""

from bot.blocks import user_text
from models.core import errors

LINK_HINT = "Type `/accessgate link` to link it, then try again."

# Most specific first: the first class the error is an instance of gives the words.
WORDING: list[tuple[type[errors.DomainError], str]] = [
    (errors.ChatUserNotLinked, f"Your Slack account is not linked to accessgate yet. {LINK_HINT}"),
    (
        errors.InactiveUser,
        "Your accessgate account is inactive, so you cannot review. Ask an administrator.",
    ),
    (
        errors.SelfApproval,
        "You cannot approve your own session: someone else in a reviewer group has to.",
    ),
    (
        errors.NotAReviewer,
        "You are not in any reviewer group of this review, so you cannot decide on it.",
    ),
    (
        errors.NotForceApprover,
        "You are not in a force-approval group of this review, so you cannot force-approve it.",
    ),
    (
        errors.OwnerOrAdminRequired,
        "Only the person who asked for this access, or an administrator, can revoke it.",
    ),
    (errors.NotFound, "This review no longer exists."),
]


def refusal_text(error: Exception) -> str:
    """What to tell the clicker about ``error``, in plain words."""
    if isinstance(error, errors.ChatEmailUnavailable):
        return (
            "accessgate could not match your Slack account by e-mail: "
            f"{user_text(error.message)}. {LINK_HINT}"
        )
    for error_class, text in WORDING:
        if isinstance(error, error_class):
            return text
    if isinstance(error, errors.ReviewClosed):
        return f"Already decided: {user_text(error.message)}."
    if isinstance(error, errors.DomainError):  # its message may quote names, groups, input
        return f"That did not go through: {user_text(error.message)}."
    return (
        "Something went wrong on our side and nothing was changed. Try again in a moment, "
        "or decide through the API."
    )
