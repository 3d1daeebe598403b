"""Alembic's migrations and the SQLAlchemy models describe the same schema, on both databases; DBOS
connects with the URL the service gives it."""

import sqlite3

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from dbos import DBOS
from sqlalchemy import create_engine

import app.models  # noqa: F401
from app.lifecycle import api as lifecycle
from app.kit import migrations
from app.kit.db import Base, driver_url
from app.kit.settings import Settings
from tests.support import FreshPostgresDatabase, require_postgres


def schema_drift(url: str) -> list:
    migrations.upgrade(url)
    engine = create_engine(driver_url(url, sync=True))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert context.get_current_revision() == migrations.head_revision()
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def test_sqlite_migrations_match_models(tmp_path):
    assert schema_drift(f"sqlite:///{tmp_path}/db.sqlite") == []


def test_postgresql_migrations_match_models():
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        assert schema_drift(database.url) == []
    finally:
        database.drop()


def test_dbos_uses_a_sibling_sqlite_file(tmp_path):
    url = lifecycle.dbos_database_url(Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/codreamer.sqlite"))
    DBOS.migrate(url)  # DBOS's own engine on that URL, as DBOS.launch() makes it
    with sqlite3.connect(tmp_path / "codreamer-dbos.sqlite") as connection:
        assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'workflow_status'").fetchone()
    assert not (tmp_path / "codreamer.sqlite").exists()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_dbos_uses_the_dbos_schema_of_the_postgresql_database(scheme):
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        url = scheme + database.url.removeprefix("postgresql")
        DBOS.migrate(lifecycle.dbos_database_url(Settings(_env_file=None, database_url=url)))
        with psycopg.connect(database.url) as connection:
            assert connection.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0] is not None
    finally:
        database.drop()
