"""Alembic environment: migrates the database of `sqlalchemy.url` when the config sets one (the
`app.kit.migrations` helpers do), else of `DATABASE_URL` (the `alembic` command, run from the root)."""

from logging.config import fileConfig
from pathlib import Path

from alembic import context
from sqlalchemy import create_engine, pool

import app.models  # noqa: F401  (registers every table)
from app.kit.db import Base, driver_url
from app.kit.settings import get_settings

config = context.config
if config.config_file_name is not None:  # the alembic command: alembic.ini's logging
    fileConfig(config.config_file_name, disable_existing_loggers=False)
url = driver_url(config.get_main_option("sqlalchemy.url") or get_settings().database_url, sync=True)


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.split("sqlite:///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
