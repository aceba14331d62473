"""When a new review falls due: its deadline and its first reminder, from the settings."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from models.core.settings import Settings


@dataclass(frozen=True)
class ReviewTiming:
    """Zero turns a rule off: no deadline, no reminders."""

    expires_after: timedelta = timedelta(0)
    remind_after: timedelta = timedelta(0)
    reminders: int = 0

    @classmethod
    def of(cls, settings: Settings) -> "ReviewTiming":
        return cls(
            expires_after=settings.review_expires_after,
            remind_after=settings.review_remind_after,
            reminders=settings.review_reminders,
        )

    def deadline(self, filed_at: datetime) -> datetime | None:
        return filed_at + self.expires_after if self.expires_after else None

    def reminder_after(self, moment: datetime, sent: int) -> datetime | None:
        """When the next reminder is due after one at ``moment`` (``sent`` so far), if any."""
        if not self.remind_after or sent >= self.reminders:
            return None
        return moment + self.remind_after


def in_words(span: timedelta) -> str:
    """``span`` as people say it: ``24 hours``, ``90 seconds``, ``1 day 2 hours``."""
    remaining = max(int(span.total_seconds()), 0)
    parts = []
    for unit, seconds in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        count, remaining = divmod(remaining, seconds)
        if count:
            parts.append(f"{count:,} {unit}" + ("" if count == 1 else "s"))
    return " ".join(parts) or "0 seconds"
