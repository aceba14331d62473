"""Several `accessgate serve` replicas on one PostgreSQL: one deployment, one license key, one
Slack bot that delivers every card once at Slack's pace, whichever replica dies.

The replicas share what the README says they share (the database and ACCESSGATE_SECRET_KEY)
and nothing else: each has a data directory of its own.
"""

import base64
import json
import secrets
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from api.cli.sidecar import perform_handshake
from models.core.clock import utc_now
from models.core.db import create_db_engine, db_scope
from models.sidecars.license import load_public_key, verify_license
from models.sign_in.tokens import issue_local_token
from models.users.service import upsert_user
from testing.postgres import free_port
from testing.processes import ServerProcess, accessgate, running_server, server_process, token
from testing.slack import SlackServer, text_of
from tests.e2e.slack.gateway import undelivered_events

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

LISTENERS = [{"name": "pg", "connection": "pg-prod", "protocol": "postgres", "port": 5432}]


@pytest.fixture
def replica_environments(environment, tmp_path) -> list[dict[str, str]]:
    """Three replicas' environments: the same database and secret key, their own data dirs."""
    shared_key = secrets.token_urlsafe(48)
    return [
        {
            **environment,
            "ACCESSGATE_SECRET_KEY": shared_key,
            "ACCESSGATE_DATA_DIR": str(tmp_path / f"replica-{n}"),
        }
        for n in range(3)
    ]


@pytest.fixture
def replicas(replica_environments, tmp_path) -> Iterator[list[str]]:
    """The first two replicas, serving."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(running_server(env, free_port(), tmp_path / f"serve-{n}.log"))
            for n, env in enumerate(replica_environments[:2])
        ]


def public_key_of(environment: dict[str, str], path: Path) -> Path:
    """What `accessgate license public-key` prints with this environment, saved to ``path``."""
    result = accessgate(environment, "license", "public-key")
    assert result.returncode == 0, result.stderr
    path.write_text(result.stdout)
    return path


def test_a_license_from_one_replica_verifies_with_the_key_another_publishes(
    replica_environments, replicas, tmp_path
):
    env_a, env_b, env_c = replica_environments
    admin = {"Authorization": "Bearer " + token(env_a, "--sub", "admin", "--groups", "admin")}
    with httpx.Client(base_url=replicas[1], headers=admin) as api:
        assert api.post("/connections", json={"name": "pg-prod", "type": "database"}).is_success
        sidecar = api.post("/sidecars", json={"name": "edge-1"}).json()
        assert api.put(f"/sidecars/{sidecar['id']}/config", json={"listeners": LISTENERS})
    published_by_b = public_key_of(env_b, tmp_path / "published-by-b.pem")

    for url in replicas:  # the sidecar's own check: the license verifies with the pinned key
        body, _ = perform_handshake(
            base_url=url, token=sidecar["token"], version="2.0.0", public_key_file=published_by_b
        )
        assert body["name"] == "edge-1"

    rotated = accessgate(env_c, "license", "rotate-key")
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout != published_by_b.read_text()
    assert public_key_of(env_a, tmp_path / "now-published-by-a.pem").read_text() == rotated.stdout
    # Any process reading the key now (a replica starting, or re-signing) signs with the new one.
    shown = accessgate(env_c, "license", "show")
    assert shown.returncode == 0, shown.stderr
    new_key = load_public_key(rotated.stdout.encode())
    verify_license(json.loads(shown.stdout)["license"], trusted_key=new_key, now=utc_now())


# -- one Slack bot across replicas ------------------------------------------------------------

BOT_TOKEN, APP_TOKEN = "xoxb-1-cluster-bot", "xapp-1-A0001-cluster-app"
CHANNELS = ["C0ONE", "C0TWO", "C0THREE", "C0FOUR"]
CARDS_PER_CHANNEL = 12
PACE = 4.0  # cards per second and channel, Slack's side and ours (Slack's is about 1)
REQUESTER, REVIEWER = "U0RITA", "U0DAN"


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def bearer(environment: dict[str, str], sub: str, groups: list[str]) -> dict[str, str]:
    engine = create_db_engine(environment["ACCESSGATE_DATABASE_URL"])
    try:
        with db_scope(engine) as db:
            upsert_user(db=db, sub=sub, name=sub.title(), email=f"{sub}@example.com", groups=groups)
    finally:
        engine.dispose()
    key = environment["ACCESSGATE_SECRET_KEY"].encode()
    signed = issue_local_token(key=key, sub=sub, now=utc_now(), ttl=timedelta(hours=1))
    return {"Authorization": f"Bearer {signed}"}


def set_up_chat(api: httpx.Client) -> None:
    """A connection per channel, reviewed by dba, and the chat plugin posting there."""
    for n in range(len(CHANNELS)):
        created = api.post("/connections", json={"name": f"db-{n}", "type": "database"})
        assert created.status_code == 201, created.text
    connections = [{"name": f"db-{n}", "config": ["dba"]} for n in range(len(CHANNELS))]
    assert api.post("/plugins", json={"name": "review", "connections": connections}).is_success
    chat = {
        "name": "chat",
        "connections": [{"name": f"db-{n}", "config": [c]} for n, c in enumerate(CHANNELS)],
        "config": {"envvars": {"CHAT_BOT_TOKEN": b64(BOT_TOKEN), "CHAT_APP_TOKEN": b64(APP_TOKEN)}},
    }
    created = api.post("/plugins", json=chat)
    assert created.status_code == 201, created.text


def most_posts_in_ten_seconds(posted_at: list[float]) -> int:
    """The most cards any 10 s window of one channel saw (Slack's own timestamps)."""
    posted_at = sorted(posted_at)
    most, start = 0, 0
    for end, at in enumerate(posted_at):
        while at - posted_at[start] >= 10.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def test_three_replicas_deliver_each_card_once_at_slacks_pace_though_one_is_killed(
    replica_environments, tmp_path
):
    with SlackServer() as slack, ExitStack() as stack:
        slack.add_app(bot_token=BOT_TOKEN, app_token=APP_TOKEN)
        slack.add_user(REQUESTER, "rita", "rita@example.com", "Rita")
        slack.add_user(REVIEWER, "dan", "dan@example.com", "Dan")
        # Slack allows short bursts over its rate; turns of different machines meet at Slack
        # a few milliseconds early or late, never more than one turn early.
        slack.pace_channels(PACE, burst=2)
        environments = [
            {
                **env,
                "ACCESSGATE_SLACK_API_URL": slack.base_url,
                "ACCESSGATE_SLACK_CHANNEL_MESSAGES_PER_SECOND": str(PACE),
                "ACCESSGATE_OUTBOX_LEASE_SECONDS": "2",  # a dead replica's events return soon
            }
            for env in replica_environments
        ]
        replicas: list[ServerProcess] = [
            stack.enter_context(server_process(env, free_port(), tmp_path / f"serve-{n}.log"))
            for n, env in enumerate(environments)
        ]
        admin = bearer(environments[0], "admin", ["admin"])
        requester = bearer(environments[0], "rita", ["dev"])
        reviewer = bearer(environments[0], "dan", ["dba"])
        apis = [stack.enter_context(httpx.Client(base_url=r.url, timeout=30)) for r in replicas]
        with httpx.Client(base_url=replicas[0].url, headers=admin) as api:
            set_up_chat(api)
        slack.wait_connected(APP_TOKEN, count=3, timeout=15)

        # A burst of reviews through two replicas, four channels.
        reviews: dict[str, str] = {}  # review id -> the channel its card goes to
        for n in range(CARDS_PER_CHANNEL * len(CHANNELS)):
            session = apis[n % 2].post(
                "/sessions",
                json={"connection": f"db-{n % len(CHANNELS)}", "script": f"select {n}"},
                headers=requester,
            )
            assert session.status_code == 201, session.text
            reviews[session.json()["review"]["id"]] = CHANNELS[n % len(CHANNELS)]
        slack.wait_for(lambda: len(slack.messages()) >= len(reviews) // 4, timeout=20)
        # Mid-burst, the replica that filed half the reviews (and woke its own deliverer for
        # them) dies: the events it leased, the turns it booked, the claims it held are left.
        replicas[1].kill()
        assert undelivered_events(environments[0]) > 0, "killed after the burst, not in it"

        def cards_of(review_id: str) -> list:
            return [m for m in slack.messages(reviews[review_id]) if review_id in text_of(m)]

        slack.wait_for(
            lambda: all(cards_of(review_id) for review_id in reviews),
            timeout=40,
            message="not every review got its card",
        )
        live = [apis[0], apis[2]]
        for n, review_id in enumerate(reviews):
            approved = live[n % 2].put(
                f"/reviews/{review_id}", json={"status": "APPROVED"}, headers=reviewer
            )
            assert approved.status_code == 200, approved.text
        slack.wait_for(
            lambda: all("APPROVED" in text_of(cards_of(r)[0]) for r in reviews),
            timeout=30,
            message="not every card was rewritten after the decisions",
        )

        assert {r: len(cards_of(r)) for r in reviews} == dict.fromkeys(reviews, 1)
        assert len(slack.messages()) == len(reviews), "no card anywhere else, none twice"
        assert slack.pacing_violations == 0, "no post Slack refused for its pace"
        posted: defaultdict[str, list[float]] = defaultdict(list)
        for message in slack.messages():
            posted[message.channel].append(message.posted_at)
        allowed = int(PACE * 10) + 1  # a 10 s window spans at most this many turns
        assert max(most_posts_in_ten_seconds(times) for times in posted.values()) <= allowed

        # Rotate the tokens through one replica; the other live one follows within 2 s.
        new_bot, new_app = "xoxb-2-rotated-bot", "xapp-2-A0001-rotated-app"
        slack.add_app(bot_token=new_bot, app_token=new_app)
        rotated = apis[0].put(
            "/plugins/chat/config",
            json={"envvars": {"CHAT_BOT_TOKEN": b64(new_bot), "CHAT_APP_TOKEN": b64(new_app)}},
            headers=admin,
        )
        assert rotated.status_code == 200, rotated.text
        slack.wait_for(
            lambda: (
                slack.socket_connections_with(new_app) == 2
                and slack.socket_connections_with(APP_TOKEN) == 0
            ),
            timeout=2,
            message="a live replica still runs on the old tokens 2 s after the rotation",
        )
        switched = time.monotonic()
        session = apis[2].post(
            "/sessions", json={"connection": "db-0", "script": "select 1"}, headers=requester
        )
        review_id = session.json()["review"]["id"]
        reviews[review_id] = CHANNELS[0]
        slack.wait_for(lambda: cards_of(review_id), message="no card after the rotation")
        since = [c for c in slack.calls if c.time > switched]
        assert [c for c in since if c.method == "chat.postMessage"]
        assert {c.token for c in since} <= {new_bot, new_app}, "an old token used after the switch"


def test_replicas_racing_on_the_schedule_expire_each_review_exactly_once(
    replica_environments, tmp_path
):
    # Reviews expire a second after filing, and both replicas look for due rows twenty times a
    # second: they race for every review, and each must be expired by exactly one of them.
    environments = [
        {
            **env,
            "ACCESSGATE_REVIEW_EXPIRES_AFTER": "1s",
            "ACCESSGATE_REVIEW_REMIND_AFTER": "0",
            "ACCESSGATE_SCHEDULER_INTERVAL_SECONDS": "0.05",
        }
        for env in replica_environments[:2]
    ]
    admin = {
        "Authorization": "Bearer " + token(environments[0], "--sub", "admin", "--groups", "admin")
    }
    dev = {"Authorization": "Bearer " + token(environments[0], "--sub", "dev", "--groups", "dev")}
    with ExitStack() as stack:
        urls = [
            stack.enter_context(running_server(env, free_port(), tmp_path / f"timed-{n}.log"))
            for n, env in enumerate(environments)
        ]
        with httpx.Client(base_url=urls[0], timeout=30) as api:
            api.post("/connections", json={"name": "pg-prod", "type": "database"}, headers=admin)
            plugin = {"name": "review", "connections": [{"name": "pg-prod", "config": ["dba"]}]}
            assert api.post("/plugins", json=plugin, headers=admin).status_code == 201
            reviews = [
                api.post(
                    "/sessions",
                    json={"connection": "pg-prod", "script": f"select {n}"},
                    headers=dev,
                ).json()["review"]["id"]
                for n in range(40)
            ]
            deadline = time.monotonic() + 30
            while True:
                statuses = {
                    api.get(f"/reviews/{review_id}", headers=admin).json()["status"]
                    for review_id in reviews
                }
                if statuses == {"REJECTED"} or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        assert statuses == {"REJECTED"}

    engine = create_db_engine(environments[0]["ACCESSGATE_DATABASE_URL"])
    try:
        with engine.connect() as connection:
            decided = connection.exec_driver_sql(
                "SELECT review_id, count(*) FROM review_decision WHERE door = 'system' "
                "GROUP BY review_id"
            ).all()
            told = connection.exec_driver_sql(
                "SELECT count(*) FROM outbox_event WHERE kind = 'review.updated' "
                "AND payload::jsonb ->> 'door' = 'system'"
            ).scalar_one()
    finally:
        engine.dispose()
    assert sorted(str(review_id) for review_id, _ in decided) == sorted(reviews)
    assert {count for _, count in decided} == {1}, "each review expired once, by one replica"
    assert told == 40
