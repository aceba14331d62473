"""The migrations build exactly the schema the tables describe, on both backends."""

import uuid
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import MetaData
from sqlmodel import select

from models.core.db import (
    MIGRATIONS_DIR,
    WRITE_OPTION,
    create_db_engine,
    db_scope,
    upgrade_database,
)
from models.reviews.machine import ReviewStatus
from models.reviews.schema import ReviewGroup
from models.tables import metadata
from models.users.schema import Organization

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def test_migrated_schema_matches_the_tables(engine):
    with engine.connect() as connection:
        differences = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), metadata
        )

    assert differences == []


def test_upgrading_again_changes_nothing_and_keeps_one_default_organization(engine):
    upgrade_database(engine)

    with db_scope(engine) as db:
        names = db.exec(select(Organization.name)).all()
    assert names == ["default"]


@pytest.fixture
def empty_engine(backend, request, tmp_path):
    if backend == "postgres":
        cluster = request.getfixturevalue("postgres")
        url = cluster.create_database(f"empty_{uuid.uuid4().hex[:12]}")
    else:
        url = f"sqlite:///{tmp_path / 'empty.db'}"
    engine = create_db_engine(url)
    yield engine
    engine.dispose()


def _migrate(engine, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def test_review_entries_get_their_reviews_key_and_status_when_upgrading(empty_engine):
    """0011 copies each review's organization, creation time and status onto its entries."""
    _migrate(empty_engine, "0010")
    created = datetime(2026, 1, 2, 3, 4, 5, 678900, tzinfo=UTC)
    ids = {name: uuid.uuid4() for name in ("user", "connection", "session", "review", "entry")}

    def key(name: str) -> str:
        return ids[name].hex if empty_engine.dialect.name == "sqlite" else str(ids[name])

    with empty_engine.execution_options(**{WRITE_OPTION: True}).begin() as connection:
        tables = MetaData()
        tables.reflect(connection)
        organization = connection.execute(tables.tables["organization"].select()).one().id
        connection.execute(
            tables.tables["user"].insert(),
            {
                "id": key("user"),
                "organization_id": organization,
                "sub": "olivia",
                "email": "",
                "name": "",
                "groups": [],
                "status": "active",
                "created_at": created,
            },
        )
        connection.execute(
            tables.tables["connection"].insert(),
            {
                "id": key("connection"),
                "organization_id": organization,
                "name": "pg-prod",
                "type": "database",
                "subtype": "",
                "created_at": created,
            },
        )
        connection.execute(
            tables.tables["gateway_session"].insert(),
            {
                "id": key("session"),
                "organization_id": organization,
                "owner_id": key("user"),
                "connection_id": key("connection"),
                "connection_name": "pg-prod",
                "script": "",
                "type": "onetime",
                "access_duration": 1,
                "created_at": created,
            },
        )
        connection.execute(
            tables.tables["review"].insert(),
            {
                "id": key("review"),
                "organization_id": organization,
                "session_id": key("session"),
                "owner_id": key("user"),
                "connection_name": "pg-prod",
                "type": "onetime",
                "status": "REJECTED",
                "force_approval_groups": [],
                "access_duration": 1,
                "created_at": created,
                "distinct_approvers": False,
                "no_self_force_approval": False,
            },
        )
        connection.execute(
            tables.tables["review_group"].insert(),
            {
                "id": key("entry"),
                "review_id": key("review"),
                "group": "dba",
                "status": "PENDING",
                "forced_review": False,
            },
        )

    upgrade_database(empty_engine)

    with db_scope(empty_engine) as db:
        entry = db.exec(select(ReviewGroup)).one()
        organization_id = db.exec(select(Organization.id)).one()
    assert entry.organization_id == organization_id
    assert entry.review_created_at == created
    assert entry.review_status is ReviewStatus.REJECTED
    assert entry.status is ReviewStatus.PENDING
