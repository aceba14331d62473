"""The migrations build exactly the schema the tables describe, on both backends."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import select

from models.db import session_scope, upgrade_database
from models.tables import metadata
from models.users import Organization

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)


def test_migrated_schema_matches_the_tables(engine):
    with engine.connect() as connection:
        differences = compare_metadata(
            MigrationContext.configure(connection, opts={"compare_type": True}), metadata
        )

    assert differences == []


def test_upgrading_again_changes_nothing_and_keeps_one_default_organization(engine):
    upgrade_database(engine)

    with session_scope(engine) as session:
        names = session.exec(select(Organization.name)).all()
    assert names == ["default"]
