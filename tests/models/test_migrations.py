"""The migrations build exactly the schema the tables describe, on both backends."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import select

from models.core.db import db_scope, upgrade_database
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
