"""Alembic's migrations and the SQLAlchemy models describe the same schema, on both databases; the
`alembic` command works from the repository root; DBOS connects with the URL the service gives it."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from dbos import DBOS
from sqlalchemy import create_engine

import app.models  # noqa: F401
from app import lifecycle, migrations
from app.db import Base, driver_url
from app.settings import Settings
from tests.support import FreshPostgresDatabase, require_postgres

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
    ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
    ("sqlite:///./data/x.sqlite", "sqlite+aiosqlite:///./data/x.sqlite"),
])
def test_plain_urls_get_a_driver(url, expected):
    assert driver_url(url) == expected


def test_the_alembic_command_migrates_from_the_repository_root(tmp_path):
    """`alembic upgrade head` and `alembic check` (autogenerate finds nothing) from a clone, on DATABASE_URL."""
    url = f"sqlite:///{tmp_path}/data/codreamer.sqlite"  # the folder does not exist yet
    env = {**os.environ, "DATABASE_URL": url}
    for args in (["upgrade", "head"], ["check"]):
        done = subprocess.run([sys.executable, "-m", "alembic", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "data" / "codreamer.sqlite") as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrations.head_revision(),)]


def test_the_package_finds_the_root_migrations():
    """The wheel ships `app/_alembic`, a link to the root `alembic/`: a copy or a broken link would drift."""
    assert (ROOT / "app" / "_alembic").resolve() == ROOT / "alembic"
    assert migrations.script_location().resolve() == ROOT / "alembic"


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
