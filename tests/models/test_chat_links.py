"""Linking Slack accounts: one-time codes, and matching by verified e-mail when switched on."""

from datetime import timedelta

import pytest

from models.chat.links import (
    LINK_CODE_LIFETIME,
    finish_chat_link,
    link_by_verified_email,
    linked_user,
    start_chat_link,
)
from models.core import errors
from models.core.clock import utc_now
from models.core.db import db_scope
from models.users.schema import UserStatus, UserUpdate
from models.users.service import update_user, upsert_user

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def people(engine):
    with db_scope(engine) as db:
        return (
            upsert_user(db=db, sub="admin", groups=["admin"]),
            upsert_user(db=db, sub="dan", email="Dan@Example.com", groups=["dba"]),
            upsert_user(db=db, sub="rita", email="rita@example.com", groups=["dev"]),
        )


def test_a_code_links_the_slack_user_to_whoever_consumes_it_once(engine):
    _admin, dan, _rita = people(engine)
    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0DAN", now=utc_now())

    with db_scope(engine) as db:
        linked = finish_chat_link(db=db, actor=dan, code=code.lower(), now=utc_now())
    assert linked.chat_id == "U0DAN"
    with db_scope(engine) as db:
        assert linked_user(db=db, chat_id="U0DAN").sub == "dan"
        with pytest.raises(errors.InvalidRequest, match="used or expired"):
            finish_chat_link(db=db, actor=dan, code=code, now=utc_now())


def test_an_expired_or_superseded_code_links_nobody(engine):
    _admin, dan, _rita = people(engine)
    started = utc_now()
    with db_scope(engine) as db:
        old = start_chat_link(db=db, chat_id="U0DAN", now=started)
        new = start_chat_link(db=db, chat_id="U0DAN", now=started)

    with db_scope(engine) as db:
        with pytest.raises(errors.InvalidRequest):
            finish_chat_link(db=db, actor=dan, code=old, now=started)
        late = started + LINK_CODE_LIFETIME + timedelta(seconds=1)
        with pytest.raises(errors.InvalidRequest):
            finish_chat_link(db=db, actor=dan, code=new, now=late)
        with pytest.raises(errors.ChatUserNotLinked):
            linked_user(db=db, chat_id="U0DAN")


def test_a_slack_account_linked_to_someone_else_is_a_conflict(engine):
    admin, dan, rita = people(engine)
    with db_scope(engine) as db:
        update_user(db=db, user_id=rita.id, update=UserUpdate(chat_id="U0X"), actor=admin)
        code = start_chat_link(db=db, chat_id="U0X", now=utc_now())

    with db_scope(engine) as db, pytest.raises(errors.Conflict):
        finish_chat_link(db=db, actor=dan, code=code, now=utc_now())
    with db_scope(engine) as db:
        assert linked_user(db=db, chat_id="U0X").sub == "rita"


def test_an_inactive_user_cannot_act_from_slack(engine):
    admin, dan, _rita = people(engine)
    with db_scope(engine) as db:
        update_user(
            db=db,
            user_id=dan.id,
            update=UserUpdate(chat_id="U0DAN", status=UserStatus.INACTIVE),
            actor=admin,
        )
        with pytest.raises(errors.InactiveUser):
            linked_user(db=db, chat_id="U0DAN")


def test_email_matching_links_exactly_one_active_unlinked_user(engine):
    _admin, _dan, _rita = people(engine)
    with db_scope(engine) as db:
        matched = link_by_verified_email(db=db, chat_id="U0DAN", email="dan@example.COM")
        assert matched is not None
        assert matched.sub == "dan"
        assert link_by_verified_email(db=db, chat_id="U0NOBODY", email="x@example.com") is None
        # Dan is linked now: a second Slack account with his address gets nobody.
        assert link_by_verified_email(db=db, chat_id="U0OTHER", email="dan@example.com") is None
        upsert_user(db=db, sub="rita-2", email="rita@example.com")
        assert link_by_verified_email(db=db, chat_id="U0R", email="rita@example.com") is None
