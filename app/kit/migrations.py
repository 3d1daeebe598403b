"""Schema migrations (Alembic), applied by `codreamer db upgrade` and on `codreamer serve` start.

The Alembic environment lives in `alembic/` beside `app/`, with `alembic.ini` at the root, so the
`alembic` command works from a clone. `app/_alembic` links to it, so the wheel ships it inside `app/`.
"""

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncConnection

from alembic import command
from app.kit.db import driver_url


def script_location() -> Path:
    """`app/_alembic/`: the folder itself in a wheel, a link to the root `alembic/` in a clone."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_alembic"
    return packaged if packaged.is_dir() else package.parent / "alembic"  # no links in the checkout


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.set_main_option("sqlalchemy.url", database_url)
    return config


def upgrade(database_url: str) -> None:
    command.upgrade(alembic_config(database_url), "head")


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


async def current_revision(connection: AsyncConnection) -> str | None:
    return await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())


__all__ = ["alembic_config", "current_revision", "driver_url", "head_revision", "script_location", "upgrade"]
