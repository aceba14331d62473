"""`accessgate chat link CODE`: the command the Slack message names, with the CLI's sign-in."""

import json

import pytest
from sqlmodel import select

from models.chat.links import start_chat_link
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope
from models.users.schema import User
from testing.processes import accessgate, token
from tests.e2e.slack.gateway import database_url_of

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def test_chat_link_links_the_slack_account_to_the_signed_in_user(environment, server, tmp_path):
    credentials = tmp_path / "credentials.json"
    dana = token(environment, "--sub", "dana", "--groups", "dba")
    credentials.write_text(json.dumps({"api": server, "token": dana}))
    environment = {**environment, "ACCESSGATE_CREDENTIALS_FILE": str(credentials)}
    engine = create_db_engine(database_url_of(environment))
    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0DANA", now=utc_now())

    linked = accessgate(environment, "chat", "link", code)
    again = accessgate(environment, "chat", "link", code)

    assert linked.returncode == 0, linked.stderr
    assert json.loads(linked.stdout)["chat_id"] == "U0DANA"
    with db_scope(engine) as db:
        assert db.exec(select(User.chat_id).where(User.sub == "dana")).one() == "U0DANA"
    engine.dispose()
    assert again.returncode == 1
    assert again.stderr.startswith("accessgate chat link: this link code is unknown, used or")


def test_chat_link_without_a_sign_in_says_how_to_sign_in(environment, tmp_path):
    environment = {**environment, "ACCESSGATE_CREDENTIALS_FILE": str(tmp_path / "none.json")}

    answer = accessgate(environment, "chat", "link", "ABCDEFGHJK")

    assert answer.returncode == 1
    assert answer.stderr == (
        "accessgate chat link: not signed in; run `accessgate login --api URL`\n"
    )
