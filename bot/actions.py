"""The ids Slack echoes back when a reviewer clicks a button or submits a modal.

They live in one module so the blocks that carry them and the handlers that listen for them
cannot drift apart.
"""

from enum import StrEnum


class ActionId(StrEnum):
    """Buttons on review cards and in the pending list."""

    APPROVE = "review.approve"
    # Opens the reject modal, because a rejection carries a reason.
    REJECT = "review.reject"
    # Opens the time-window modal before approving.
    APPROVE_WINDOW = "review.approve_window"
    REVOKE = "review.revoke"
    FORCE_APPROVE = "review.force_approve"
    # App Home: take reminders as one direct message per interval, or under each card.
    REMINDERS_BY_DM = "preferences.reminders_by_dm"


class ViewId(StrEnum):
    """Callback ids of the modals, sent back on submission."""

    REJECT = "review.reject_reason"
    TIME_WINDOW = "review.time_window"


# The actions block of a review card; its buttons all carry the review id as their value.
REVIEW_ACTIONS_BLOCK = "review_actions"

# Block and action ids of the inputs inside the modals, the keys of view["state"]["values"].
REASON_BLOCK = "reason"
REASON_INPUT = "reason_input"
WINDOW_START_BLOCK = "window_start"
WINDOW_START_INPUT = "window_start_input"
WINDOW_END_BLOCK = "window_end"
WINDOW_END_INPUT = "window_end_input"
