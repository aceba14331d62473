"""The review page and the link page, as a browser sees them (local sign-in with a token).

The same pages are driven through the identity provider in a real browser in
tests/e2e/test_pages.py; here every rule of the forms is checked quickly.
"""

import re
from datetime import timedelta

import pytest
from freezegun import freeze_time
from sqlmodel import select

from models.chat.links import start_chat_link
from models.core.clock import utc_now
from models.core.db import db_scope
from models.reviews.schema import Door, ReviewDecisionRecord
from models.users.schema import User
from tests.factories import configure_review_groups, make_connection, make_user, open_session

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"]),
        "owner": make_user(engine, "olivia", ["dev"], name="Olivia Owner"),
        "dba": make_user(engine, "dana", ["dba"], name="Dana DBA"),
        "outsider": make_user(engine, "otto", ["web"]),
    }


@pytest.fixture
def review(client, people):
    make_connection(client, people["admin"])
    configure_review_groups(client, people["admin"], "pg-prod", ["dba"])
    return open_session(
        client, people["owner"], script="DELETE FROM orders WHERE id = 7", reason="INC-42: <b>"
    )["review"]


def sign_in(client, person) -> None:
    answer = client.post(
        "/sign-in", data={"token": person.token, "next": "/sign-in/done"}, follow_redirects=False
    )
    assert answer.status_code == 303, answer.text
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def test_a_browser_not_signed_in_is_sent_to_sign_in_and_back(client, review):
    answer = client.get(f"/reviews/{review['id']}", follow_redirects=False)

    assert answer.status_code == 303
    assert answer.headers["location"] == f"/sign-in?next=%2Freviews%2F{review['id']}"
    form = client.get(answer.headers["location"])
    assert form.status_code == 200
    assert f'name="next" value="/reviews/{review["id"]}"' in form.text


def test_the_page_shows_the_review_as_a_person_reads_it(client, people, review):
    sign_in(client, people["dba"])

    page = client.get(f"/reviews/{review['id']}")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    text = page.text
    assert "Olivia Owner" in text
    assert "pg-prod" in text
    assert "DELETE FROM orders WHERE id = 7" in text
    assert "INC-42: &lt;b&gt;" in text  # the reason, escaped
    assert ">Approve</button>" in text
    assert ">Reject</button>" in text
    assert ">Revoke</button>" not in text
    assert "Nobody has decided yet." in text


def test_approving_on_the_page_decides_through_the_page_door(client, people, review, engine):
    sign_in(client, people["dba"])
    page = client.get(f"/reviews/{review['id']}")

    answer = client.post(
        f"/reviews/{review['id']}/decision",
        data={"csrf_token": csrf_of(page.text), "status": "APPROVED"},
        follow_redirects=False,
    )

    assert answer.status_code == 303
    after = client.get(answer.headers["location"])
    assert "Your approval is recorded." in after.text
    assert 'id="status">approved<' in after.text
    assert "<td>Dana DBA</td><td>page</td><td>APPROVED</td>" in after.text
    assert ">Approve</button>" not in after.text
    with db_scope(engine) as db:
        record = db.exec(select(ReviewDecisionRecord)).one()
    assert record.door is Door.PAGE
    api = client.get(f"/api/reviews/{review['id']}", headers=people["owner"].headers)
    assert api.json()["status"] == "APPROVED"


def test_rejecting_keeps_the_reason(client, people, review):
    sign_in(client, people["dba"])
    page = client.get(f"/reviews/{review['id']}")

    client.post(
        f"/reviews/{review['id']}/decision",
        data={
            "csrf_token": csrf_of(page.text),
            "status": "REJECTED",
            "rejection_reason": "not during the freeze",
        },
    )

    api = client.get(f"/api/reviews/{review['id']}", headers=people["owner"].headers)
    assert api.json()["status"] == "REJECTED"
    assert api.json()["rejection_reason"] == "not during the freeze"


def test_a_form_without_the_csrf_token_or_from_another_site_is_refused(client, people, review):
    sign_in(client, people["dba"])
    page = client.get(f"/reviews/{review['id']}")
    url = f"/reviews/{review['id']}/decision"

    missing = client.post(url, data={"status": "APPROVED"})
    wrong = client.post(url, data={"status": "APPROVED", "csrf_token": "guess"})
    elsewhere = client.post(
        url,
        data={"status": "APPROVED", "csrf_token": csrf_of(page.text)},
        headers={"Origin": "https://evil.example"},
    )

    for answer in (missing, wrong, elsewhere):
        assert answer.status_code == 403
    assert "did not come from this site" in missing.text
    assert "from another site" in elsewhere.text
    api = client.get(f"/api/reviews/{review['id']}", headers=people["owner"].headers)
    assert api.json()["status"] == "PENDING"


def test_the_requester_sees_no_decision_buttons_and_cannot_approve(client, people, review):
    sign_in(client, people["owner"])
    page = client.get(f"/reviews/{review['id']}")
    assert ">Approve</button>" not in page.text

    answer = client.post(
        f"/reviews/{review['id']}/decision",
        data={"csrf_token": csrf_of(page.text), "status": "APPROVED"},
    )

    assert answer.status_code == 403
    assert "cannot approve your own session" in answer.text


def test_a_review_the_viewer_may_not_see_is_not_found(client, people, review):
    sign_in(client, people["outsider"])

    answer = client.get(f"/reviews/{review['id']}")

    assert answer.status_code == 404
    assert "review not found" in answer.text


def test_a_wrong_token_does_not_sign_in(client):
    answer = client.post("/sign-in", data={"token": "nope", "next": "/"})

    assert answer.status_code == 401
    assert "not valid for this service" in answer.text
    assert "set-cookie" not in answer.headers


def test_sign_in_never_goes_back_to_another_site(client, people):
    answer = client.post(
        "/sign-in",
        data={"token": people["dba"].token, "next": "//evil.example/x"},
        follow_redirects=False,
    )

    assert answer.headers["location"] == "/sign-in/done"


def test_signing_out_ends_the_session(client, people, review):
    sign_in(client, people["dba"])
    page = client.get(f"/reviews/{review['id']}")

    client.post("/sign-out", data={"csrf_token": csrf_of(page.text)})

    client.cookies.clear()
    assert client.get(f"/reviews/{review['id']}", follow_redirects=False).status_code == 303


def test_a_session_expires(client, people, review):
    sign_in(client, people["dba"])

    with freeze_time(utc_now() + timedelta(hours=13)):
        answer = client.get(f"/reviews/{review['id']}", follow_redirects=False)

    assert answer.status_code == 303


def test_the_link_page_links_the_slack_account_once_confirmed(client, people, engine):
    with db_scope(engine) as db:
        code = start_chat_link(db=db, chat_id="U0DANA", now=utc_now())
    sign_in(client, people["dba"])

    confirm = client.get(f"/chat/link?code={code}")
    assert confirm.status_code == 200
    assert "Link my Slack account" in confirm.text
    with db_scope(engine) as db:
        assert db.exec(select(User.chat_id).where(User.sub == "dana")).one() is None

    done = client.post("/chat/link", data={"csrf_token": csrf_of(confirm.text), "code": code})

    assert done.status_code == 200
    assert "Your Slack account is linked" in done.text
    with db_scope(engine) as db:
        assert db.exec(select(User.chat_id).where(User.sub == "dana")).one() == "U0DANA"
    again = client.post("/chat/link", data={"csrf_token": csrf_of(confirm.text), "code": code})
    assert again.status_code == 400
    assert "unknown, used or expired" in again.text
