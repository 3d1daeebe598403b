"""Database engine and sessions: one SQLAlchemy async code path for SQLite and PostgreSQL."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from sqlalchemy import JSON, DateTime, MetaData, event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

from app.settings import Settings

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict: JSON, list: JSON}


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on both databases (SQLite forgets the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect):
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def driver_url(url: str, *, sync: bool = False) -> str:
    """The SQLAlchemy URL for a plain `postgresql://` or `sqlite:///` URL (async drivers unless `sync`)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        return ("postgresql+psycopg://" if sync else "postgresql+asyncpg://") + url[len("postgresql://"):]
    if url.startswith("sqlite:///") and not sync:
        return "sqlite+aiosqlite:///" + url[len("sqlite:///"):]
    return url


def create_engine(settings: Settings) -> AsyncEngine:
    if settings.is_sqlite:
        settings.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(driver_url(settings.database_url), connect_args={"timeout": 30})

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(connection, _record):
            connection.isolation_level = None  # we emit BEGIN ourselves, below
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(connection):
            # Writers take SQLite's write lock up front, so read-then-write transactions never
            # fail on a stale snapshot; readers run in autocommit, concurrently under WAL.
            if connection.get_execution_options().get("writer"):
                connection.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    # No pre-ping (a round trip per checkout): a connection found dead invalidates the pool instead.
    return create_async_engine(driver_url(settings.database_url), pool_size=10, max_overflow=20, pool_recycle=1800)


class Database:
    def __init__(self, settings: Settings):
        self.engine = create_engine(settings)
        self._writers = async_sessionmaker(self.engine.execution_options(writer=True), expire_on_commit=False)
        # Reads need no transaction: autocommit saves a BEGIN and a COMMIT round trip per request.
        self._readers = async_sessionmaker(self.engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A read-write transaction, committed on exit."""
        async with self._writers() as session, session.begin():
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._readers() as session:
            yield session

    async def close(self) -> None:
        await self.engine.dispose()
