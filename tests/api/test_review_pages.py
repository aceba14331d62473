"""GET /api/reviews a page at a time: cursors that visit each visible review once."""

from typing import Any

import pytest
from freezegun import freeze_time
from sqlmodel import select

from models.core.db import db_scope
from models.reviews.listing import reviews_waiting_on
from models.users.schema import User
from tests.factories import (
    Person,
    configure_review_groups,
    decide,
    make_connection,
    make_user,
    open_session,
)

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def people(engine):
    return {
        "admin": make_user(engine, "admin", ["admin"]),
        "olivia": make_user(engine, "olivia", ["dev"]),
        "owen": make_user(engine, "owen", ["dev", "dba"]),
        "dba": make_user(engine, "dana", ["dba"]),
        "sre": make_user(engine, "sam", ["sre"]),
        "both": make_user(engine, "bo", ["dba", "sre", "web"]),
        "outsider": make_user(engine, "otto", ["web"]),
    }


@pytest.fixture
def connections(client, people):
    """pg-prod is reviewed by dba and sre, pg-dba by dba alone, pg-sre by sre alone."""
    for name, groups in {"pg-prod": ["dba", "sre"], "pg-dba": ["dba"], "pg-sre": ["sre"]}.items():
        make_connection(client, people["admin"], name)
        configure_review_groups(client, people["admin"], name, groups)


def file_reviews(client, people) -> list[dict[str, Any]]:
    """Nine reviews, several filed in the same instant, from two owners on three connections."""
    reviews = []
    for instant, (owner, connection) in zip(
        ["10:00", "10:00", "10:00", "10:01", "10:01", "10:02", "10:03", "10:03", "10:03"],
        [
            ("olivia", "pg-prod"),
            ("owen", "pg-dba"),
            ("olivia", "pg-sre"),
            ("olivia", "pg-dba"),
            ("owen", "pg-sre"),
            ("owen", "pg-prod"),
            ("olivia", "pg-sre"),
            ("olivia", "pg-dba"),
            ("owen", "pg-sre"),
        ],
        strict=True,
    ):
        with freeze_time(f"2026-11-22 {instant}:00"):
            review = open_session(client, people[owner], connection)["review"]
        reviews.append({**review, "filed_by": owner, "connection": connection})
    return reviews


def walk(client, person: Person, limit: int, between_pages=None, **params) -> list[list[str]]:
    """Every page of the caller's reviews, following next_cursor; ids per page."""
    pages: list[list[str]] = []
    query: dict[str, Any] = {"limit": limit, **params}
    while True:
        response = client.get("/api/reviews", params=query, headers=person.headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert set(body) == {"items", "next_cursor"}
        pages.append([item["id"] for item in body["items"]])
        assert len(pages) < 50, "the walk never ends"
        if body["next_cursor"] is None:
            return pages
        if between_pages is not None:
            between_pages()
        query["cursor"] = body["next_cursor"]


def newest_first(reviews: list[dict[str, Any]]) -> list[str]:
    ordered = sorted(reviews, key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return [review["id"] for review in ordered]


def visible_to(person: str, reviews) -> list[dict[str, Any]]:
    groups = {"olivia": set(), "owen": {"dba"}, "dba": {"dba"}, "sre": {"sre"}}
    groups |= {"both": {"dba", "sre"}, "outsider": set()}
    by_connection = {"pg-prod": {"dba", "sre"}, "pg-dba": {"dba"}, "pg-sre": {"sre"}}
    if person == "admin":
        return list(reviews)
    return [
        review
        for review in reviews
        if review["filed_by"] == person or groups[person] & by_connection[review["connection"]]
    ]


@pytest.mark.parametrize("limit", [1, 2, 4, 50])
def test_walking_the_cursors_visits_each_visible_review_once_newest_first(
    client, people, connections, limit
):
    reviews = file_reviews(client, people)

    for person in ("admin", "olivia", "owen", "dba", "sre", "both", "outsider"):
        expected = visible_to(person, reviews)
        pages = walk(client, people[person], limit)

        visited = [review_id for page in pages for review_id in page]
        assert visited == newest_first(expected), person
        assert all(len(page) == limit for page in pages[:-1])
        assert len(pages) == max(1, -(-len(expected) // limit))


def test_reviews_filed_during_a_walk_do_not_disturb_it(client, people, connections):
    reviews = file_reviews(client, people)
    owners = iter(["olivia", "owen"] * 30)
    minutes = iter(range(10, 60))

    def file_one_more():
        owner = next(owners)
        with freeze_time(f"2026-11-22 11:{next(minutes)}:00"):
            review = open_session(client, people[owner], "pg-prod")["review"]
        reviews.append({**review, "filed_by": owner, "connection": "pg-prod"})

    for person in ("admin", "dba", "olivia"):
        there_at_the_start = list(reviews)
        pages = walk(client, people[person], 2, between_pages=file_one_more)

        visited = [review_id for page in pages for review_id in page]
        assert visited == newest_first(visible_to(person, there_at_the_start)), person
    assert len(reviews) > 9 + 8


def test_a_status_filter_walks_only_reviews_in_that_status(client, people, connections):
    reviews = file_reviews(client, people)
    decided = [reviews[0], reviews[3], reviews[7]]
    for review in decided:
        assert decide(client, people["dba"], review["id"], status="REJECTED").status_code == 200

    for person in ("admin", "dba", "sre", "olivia"):
        pages = walk(client, people[person], 1, status="REJECTED")
        visible = {r["id"] for r in visible_to(person, reviews)}
        expected = [r for r in decided if r["id"] in visible]
        assert [review_id for page in pages for review_id in page] == newest_first(expected)


def test_a_walk_with_nothing_to_show_is_one_empty_page(client, people, connections):
    file_reviews(client, people)

    assert walk(client, people["outsider"], 10) == [[]]


@pytest.mark.parametrize(
    "cursor",
    ["nope", "", "!!!", "MjAyNi0xMS0yMlQxMDowMDowMHxub3QtYS11dWlk", "x" * 300],
)
def test_a_cursor_the_server_never_gave_is_400(client, people, cursor):
    response = client.get(
        "/api/reviews", params={"cursor": cursor}, headers=people["admin"].headers
    )

    assert response.status_code == 400
    assert "cursor" in response.json()["message"]


def test_paging_by_offset_is_refused_with_the_way_to_page(client, people):
    response = client.get("/api/reviews", params={"offset": 50}, headers=people["admin"].headers)

    assert response.status_code == 400
    assert response.json()["message"] == (
        "offset: paging is by cursor; pass the previous page's next_cursor as cursor"
    )


def test_the_waiting_list_holds_only_reviews_still_waiting_on_the_group(
    client, engine, people, connections
):
    reviews = file_reviews(client, people)

    def waiting(person: str) -> list[str]:
        with db_scope(engine) as db:
            reviewer = db.exec(select(User).where(User.id == people[person].id)).one()
            ids = reviews_waiting_on(db=db, reviewer=reviewer, limit=50)
        return [str(review_id) for review_id in ids]

    oldest_first = newest_first(visible_to("dba", reviews))[::-1]
    owen_own = {r["id"] for r in reviews if r["filed_by"] == "owen"}
    assert waiting("dba") == oldest_first
    assert waiting("owen") == [r for r in oldest_first if r not in owen_own]

    # dba decided pg-prod's first review (sre still has to); sre rejected another pg-prod one,
    # which leaves dba's entry PENDING on a review that waits for nobody any more.
    first, rejected, approved = reviews[0]["id"], reviews[5]["id"], reviews[1]["id"]
    for person, review_id, status in [
        ("dba", first, "APPROVED"),
        ("sre", rejected, "REJECTED"),
        ("both", approved, "APPROVED"),
    ]:
        assert decide(client, people[person], review_id, status=status).status_code == 200

    decided = {first, rejected, approved}
    assert waiting("dba") == [r for r in oldest_first if r not in decided]
    assert first in waiting("sre")
    assert rejected not in waiting("sre")
