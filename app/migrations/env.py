"""Alembic environment: migrates the database of `DATABASE_URL` (or the URL passed in the config)."""

from alembic import context
from sqlalchemy import create_engine, pool

import app.models  # noqa: F401  (registers every table)
from app.db import Base, driver_url
from app.settings import get_settings

config = context.config
url = config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=driver_url(url, sync=True), target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(driver_url(url, sync=True), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
