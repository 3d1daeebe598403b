"""Alembic's migrations and the SQLAlchemy models describe the same schema, on both databases."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

import app.models  # noqa: F401
from app import migrations
from app.db import Base, driver_url
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


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
    ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
    ("sqlite:///./data/x.sqlite", "sqlite+aiosqlite:///./data/x.sqlite"),
])
def test_plain_urls_get_a_driver(url, expected):
    assert driver_url(url) == expected


def test_migrations_and_dbos_use_the_sync_driver():
    assert driver_url("postgresql://u@h/db", sync=True) == "postgresql+psycopg://u@h/db"
