"""Pending lists shown in Slack are replaced while their response_url lasts: five uses, 30 min."""

from datetime import UTC, datetime, timedelta

from models.chat.pending_lists import remember_pending_list, take_pending_list_url
from models.core.db import db_scope

SHOWN = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
URL = "https://hooks.slack.com/commands/T1/1/abc"


def test_a_shown_list_can_be_replaced_four_more_times(engine):
    with db_scope(engine) as db:
        remember_pending_list(db=db, chat_id="U0DAN", response_url=URL, now=SHOWN)
        taken = [take_pending_list_url(db=db, chat_id="U0DAN", now=SHOWN) for _ in range(5)]

    assert taken == [URL, URL, URL, URL, None]  # showing it was the first of five uses


def test_a_list_older_than_thirty_minutes_cannot_be_replaced(engine):
    with db_scope(engine) as db:
        remember_pending_list(db=db, chat_id="U0DAN", response_url=URL, now=SHOWN)
        late = SHOWN + timedelta(minutes=30)
        assert take_pending_list_url(db=db, chat_id="U0DAN", now=late) is None
        just_in_time = SHOWN + timedelta(minutes=29, seconds=59)
        assert take_pending_list_url(db=db, chat_id="U0DAN", now=just_in_time) == URL


def test_showing_a_new_list_replaces_the_old_url_and_its_count(engine):
    newer = URL.replace("abc", "def")
    with db_scope(engine) as db:
        remember_pending_list(db=db, chat_id="U0DAN", response_url=URL, now=SHOWN)
        for _ in range(4):
            take_pending_list_url(db=db, chat_id="U0DAN", now=SHOWN)
        remember_pending_list(db=db, chat_id="U0DAN", response_url=newer, now=SHOWN)

        assert take_pending_list_url(db=db, chat_id="U0DAN", now=SHOWN) == newer
        assert take_pending_list_url(db=db, chat_id="U0SARA", now=SHOWN) is None
