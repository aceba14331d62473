"""Fixtures shared by every test: databases (SQLite and a throwaway PostgreSQL), the app, users.

Each test gets its own database copied from one migrated once per run, so tests never share
state and still commit for real (the concurrency tests need real transactions).
"""

import itertools
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import freezegun
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from models.core.db import create_db_engine, upgrade_database
from models.core.settings import Settings
from testing.postgres import PostgresCluster
from tests.factories import TEST_SECRET_KEY, Person, make_user

# Frozen time is for the code under test: the app's background loops (the scheduler, the
# housekeeping) keep real time, or a test moving the clock by hours would wake them mid-test.
freezegun.configure(extend_ignore_list=["asyncio"])

PG_TEMPLATE = "accessgate_template"
_database_numbers = itertools.count()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = create_db_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    # Closing the last connection checkpoints the WAL into the file, so copying it is enough.
    engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster().start()
    try:
        engine = create_db_engine(cluster.create_database(PG_TEMPLATE))
        upgrade_database(engine)
        engine.dispose()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """Which database a test runs on; parametrize it indirectly to add "postgres"."""
    name: str = request.param
    return name


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "postgres":
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        return cluster.create_database(f"test_{next(_database_numbers)}", template=PG_TEMPLATE)
    template: Path = request.getfixturevalue("sqlite_template")
    path = tmp_path / "accessgate.db"
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_db_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    # Reviews do not expire and nobody is reminded unless a test is about that: most tests
    # move the clock by days between filing and deciding.
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        secret_key=TEST_SECRET_KEY,
        review_expires_after=timedelta(0),
        review_remind_after=timedelta(0),
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def admin(engine: Engine) -> Person:
    """A member of the admin group, with a token."""
    return make_user(engine, "admin", ["admin"])


@pytest.fixture
def dev(engine: Engine) -> Person:
    """A member of the dev group (no admin rights), with a token."""
    return make_user(engine, "dev", ["dev"])
