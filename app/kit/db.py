"""Database engine and sessions: one SQLAlchemy async code path for SQLite and PostgreSQL."""

import asyncio
import json
import logging
import re
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from enum import StrEnum

import asyncpg
import sqlalchemy
from pydantic import TypeAdapter
from sqlalchemy import JSON, DateTime, Executable, MetaData, Row, String, event, text
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.pool import StaticPool
from sqlalchemy.types import TypeDecorator

from app.kit.settings import Settings

log = logging.getLogger(__name__)

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


class TypedJSON(TypeDecorator):
    """JSON whose value is read and written as a typed one (a pydantic model, or a list of them)."""

    impl = JSON
    cache_ok = True

    def __init__(self, adapter: TypeAdapter):
        super().__init__()
        self.adapter = adapter

    def process_bind_param(self, value, dialect):
        return None if value is None else self.adapter.dump_python(value, mode="json")

    def process_result_value(self, value, dialect):
        return None if value is None else self.adapter.validate_python(value)


class StrEnumText(TypeDecorator):
    """A StrEnum stored as its value in a plain text column (no database enum type to migrate)."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[StrEnum], length: int = 16):
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value, dialect):
        return None if value is None else self.enum(value).value

    def process_result_value(self, value, dialect):
        return None if value is None else self.enum(value)


async def serialize_on(session: AsyncSession, name: str) -> None:
    """Makes concurrent transactions that name the same lock take turns until they end: a PostgreSQL
    advisory lock on the name; SQLite's write transactions (BEGIN IMMEDIATE) take turns already."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"), {"name": name})


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


def create_engine(settings: Settings, *, reader: bool = False) -> AsyncEngine:
    """The engine; on SQLite, `reader` makes one whose connections only ever read in autocommit, so handing one back
    needs no rollback (aiosqlite's rollback is a trip to its thread: ~0.4 ms of CPU a request)."""
    if settings.is_sqlite:
        settings.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(driver_url(settings.database_url), connect_args={"timeout": 30}, hide_parameters=True,
                                     **({"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None} if reader else {}))

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
    # Pre-ping: a connection the server dropped (a restart, a terminated backend) is replaced at
    # checkout instead of failing the request or step that drew it; one loopback round trip.
    return create_async_engine(
        driver_url(settings.database_url), pool_size=settings.database_pool_size, max_overflow=settings.database_max_overflow,
        pool_timeout=settings.database_pool_timeout_s, pool_recycle=1800, pool_pre_ping=True,
        hide_parameters=True,  # an error's log line never carries a row's values (emails, prospects, secrets sealed or not)
    )


# SQLSTATE classes that pass: connection exceptions, operator intervention (a terminated
# backend, a shutdown), insufficient resources, transaction rollback (serialization, deadlock).
_TRANSIENT_SQLSTATE_CLASSES = ("08", "57", "53", "40")


def is_transient(exc: BaseException) -> bool:
    """A database error that a retry may not meet: a lost connection, a locked SQLite file, an outage."""
    if isinstance(exc, (ConnectionError, TimeoutError)):  # asyncpg's connect raises these unwrapped
        return True
    for error in _chain(exc):
        if isinstance(error, PoolTimeout):
            return True
        if isinstance(error, DBAPIError):
            if error.connection_invalidated or isinstance(error, OperationalError):
                return True
            state = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
            return isinstance(state, str) and state[:2] in _TRANSIENT_SQLSTATE_CLASSES
    return False


def describe(exc: BaseException) -> str:
    """A message safe to show callers: a database error names its class, never its SQL or parameters."""
    if isinstance(exc, SQLAlchemyError):
        orig = getattr(exc, "orig", None)
        return f"database error ({type(orig or exc).__name__}); the details are in the server log"
    text = str(exc)
    return f"{type(exc).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}"


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


# Below this much free space on the SQLite file's disk, writes are about to fail (SQLite needs room for its journal).
MIN_FREE_DISK_BYTES = 16 * 1024 * 1024
CLOSE_WAIT_S = 5.0  # for sessions still handing their connection back when the engine is disposed
# PostgreSQL glances share a few connections, so one reply held up on a busy machine does not queue the others behind it.
GLANCE_CONNECTIONS = 4
LISTEN_CHECK_S = 5.0  # how often a listening connection that heard nothing must hear a probe (and how long it may take)
LISTEN_RETRY_S, LISTEN_RETRY_MAX_S = 1.0, 60.0  # after a listening connection failed, before the next; doubling
PREPARE_S = 5.0  # the most an announced row waits for what is prepared for it before it is taken anyway
_PROBE = ""  # the payload of a probe notice (a change's is JSON)
_NAMED_PARAMETER = re.compile(r"(?<!:):(\w+)")  # :name, not a ::cast


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """A glance changes no session state, so a connection handed back needs none of asyncpg's reset queries."""


class KeptReads:
    """Reads kept until PostgreSQL announces a change: a trigger NOTIFYs a channel, with the changed row itself, at
    commit, and a connection of this process LISTENs to it. A kept row takes the announced one in place, and so does
    a kept query's answer unless the change may move the row into or out of it (then the query is read again).

    Nothing is kept while no connection listens (a lost one may have missed notices), and a connection counts as
    listening only while it hears the probes it is sent: everything kept is dropped when listening stops or starts.
    A read is kept only under the token taken before it, if no notice came while it ran (it may have read the row
    before the change). Every commit this process makes drops everything, so a client reads its own writes at once;
    what another process commits shows once its notice arrives, within milliseconds.
    """

    MAX_KEPT = 100_000  # of each kind; past it everything is dropped, and kept again as it is read

    def __init__(self) -> None:
        self.rows: dict[str, tuple] = {}  # by the key the notices name; each row in the notices' shape, key first
        self.queries: dict[tuple, list[tuple]] = {}  # their answers, rows in the same shape
        self.listening = False
        # Awaited with an announced row that was read here before it is taken (reads meanwhile get the row it
        # replaces): the API renders the answers the row's version will give, so no poll waits for the database.
        self.prepare: Callable[[str, tuple], Awaitable[None]] | None = None
        self._generation = 0

    def row(self, key: str) -> tuple | None:
        return self.rows.get(key) if self.listening else None

    def query(self, key: tuple) -> list[tuple] | None:
        return self.queries.get(key) if self.listening else None

    def token(self) -> int | None:
        """Taken before a read: a read may be kept only under a token still current after it."""
        return self._generation if self.listening else None

    def keep_row(self, token: int | None, key: str, row: tuple) -> None:
        self._keep(self.rows, token, key, row)

    def keep_query(self, token: int | None, key: tuple, rows: list[tuple]) -> None:
        self._keep(self.queries, token, key, rows)

    def _keep(self, kept: dict, token: int | None, key, value) -> None:
        if token is not None and token == self._generation:
            if len(kept) >= self.MAX_KEPT:
                kept.clear()
            kept[key] = value

    def changed(self, key: str | None, row: tuple | None = None, moved: bool = True) -> None:
        """The row `key` is now `row` (None: gone, or not announced, so it is read again); `moved`: the change may move
        it into or out of a query's answer. `key` None: anything may have changed."""
        self._generation += 1
        if key is None:
            self.rows.clear()
            self.queries.clear()
            return
        if row is None:
            self.rows.pop(key, None)
        elif key in self.rows:
            self.rows[key] = row
        if moved or row is None:
            self.queries.clear()
            return
        for rows in self.queries.values():  # a query's rows are in the notices' shape: each row's key first
            for i, kept in enumerate(rows):
                if kept[0] == key:
                    rows[i] = row

    async def announced(self, payload: str) -> None:
        """A notice: {"key": …, "row": […], "moved": bool} (see migration 0009); anything else drops everything."""
        try:
            notice = json.loads(payload)
            key, row, moved = notice["key"], notice.get("row"), bool(notice.get("moved", True))
            row = tuple(row) if isinstance(row, list) else None
        except (ValueError, TypeError, KeyError):
            key, row, moved = None, None, True
        if self.prepare is not None and row is not None and self._read_here(key):
            try:
                await asyncio.wait_for(self.prepare(key, row), PREPARE_S)
            except Exception:  # what was not prepared is made on the first read, as without it
                log.debug("preparing for %s's notice failed", key, exc_info=True)
        self.changed(key, row, moved)

    def _read_here(self, key: str) -> bool:
        return key in self.rows or any(kept[0] == key for rows in self.queries.values() for kept in rows)


async def _commit_and_close(session: AsyncSession) -> None:
    try:
        await session.commit()
    finally:
        await session.close()


class Database:
    def __init__(self, settings: Settings):
        self.engine = create_engine(settings)
        self._sqlite_folder = settings.sqlite_path.parent if settings.is_sqlite else None
        self._closing: set[asyncio.Future] = set()
        self._writers = async_sessionmaker(self.engine.execution_options(writer=True), expire_on_commit=False)
        # Reads need no transaction: autocommit saves a BEGIN and a COMMIT round trip per request. PostgreSQL's
        # readers share the pool (its connection count is the operator's to bound); SQLite's get their own engine.
        self._read_engine = (create_engine(settings, reader=True) if settings.is_sqlite
                             else self.engine.execution_options(isolation_level="AUTOCOMMIT"))
        self._readers = async_sessionmaker(self._read_engine, expire_on_commit=False)
        self._sqlite_path = settings.sqlite_path if settings.is_sqlite else None
        self._postgres_url = None if settings.is_sqlite else settings.database_url
        self._connect_timeout_s = settings.database_pool_timeout_s
        self._glance: sqlite3.Connection | None = None
        self._sqlite_rows: sqlalchemy.Engine | None = None
        self._glance_pool: asyncpg.Pool | None = None
        self._glance_pool_lock = asyncio.Lock()
        self._kept: dict[str, KeptReads] = {}
        self._listeners: dict[str, asyncio.Task] = {}
        self._listen_after: dict[str, float] = {}  # no new listener before this time (monotonic) after one failed
        self._listen_failures: dict[str, int] = {}  # in a row

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        """A read-write transaction, committed on exit (rolled back on an error)."""
        session = self._writers()
        try:
            try:
                yield session  # the session begins on its first statement
            except BaseException:
                await self._close(session)
                raise
            await self._uninterrupted(_commit_and_close(session))  # the commit hands the connection back: see `_close`
        finally:
            for kept in self._kept.values():
                kept.changed(None)

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        session = self._readers()
        try:
            yield session
        finally:
            await self._close(session)

    async def glance(self, sql: str, **params) -> list[tuple]:
        """A small read for a hot path (the version check before an answer already rendered), `:name` parameters.

        It skips what a session costs: on SQLite it runs on a plain sqlite3 connection in the event loop's own
        thread (a primary-key read under WAL takes microseconds and never waits for a writer, while a trip to
        aiosqlite's thread costs about a millisecond of CPU); on PostgreSQL on a few asyncpg connections of its own
        (no SQLAlchemy checkout, no pre-ping round trip). Should that fail (a busy file, a restarted server), the read
        goes through the pool like any other."""
        try:
            if self._sqlite_path is not None:
                return self._glance_sqlite(sql, params)
            if self._postgres_url is not None:
                return await self._glance_postgres(sql, params)
        except Exception:  # whatever it was, the pool's path has the retries and the errors callers expect
            await self._close_glance()
        async with self.connection() as connection:
            return [tuple(row) for row in await connection.execute(text(sql), params)]

    async def rows(self, statement: Executable, params: dict) -> Sequence[Row]:
        """A read for a hot path whose rows need SQLAlchemy's types (a run's view, a run's iterations), sessionless.

        On SQLite it runs in the event loop's own thread, as a glance does: a trip to aiosqlite's thread and back is
        two wake-ups, and while runs keep this machine's cores busy each may wait milliseconds; those trips set the
        API's p99. On PostgreSQL, and should that fail, it runs on a reader's connection."""
        if self._sqlite_path is not None:
            try:
                with self._sqlite_rows_engine().connect() as connection:
                    return connection.execute(statement, params).all()
            except Exception:  # a busy file, say: the pool's path waits for it and raises what callers expect
                await self._close_glance()
        async with self.connection() as connection:
            return (await connection.execute(statement, params)).all()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A reader's connection outside a session, handed back as a session's is, even when its user is cancelled."""
        connection = await self._read_engine.connect().start()
        try:
            yield connection
        finally:
            await self._close(connection)

    def _sqlite_rows_engine(self) -> sqlalchemy.Engine:
        if self._sqlite_rows is None:  # SQLAlchemy's types over the glances' connection
            self._sqlite_rows = sqlalchemy.create_engine(
                "sqlite://", creator=self._sqlite_here, poolclass=StaticPool, isolation_level="AUTOCOMMIT", hide_parameters=True)
        return self._sqlite_rows

    def _glance_sqlite(self, sql: str, params: dict) -> list[tuple]:
        return self._sqlite_here().execute(sql, params).fetchall()

    def _sqlite_here(self) -> sqlite3.Connection:
        """The event loop's own SQLite connection: it reads in autocommit and never waits for a lock."""
        if self._glance is None:
            self._glance = sqlite3.connect(self._sqlite_path, isolation_level=None, check_same_thread=False)
            self._glance.execute("PRAGMA busy_timeout=0")
        return self._glance

    async def _glance_postgres(self, sql: str, params: dict) -> list[tuple]:
        names: list[str] = []
        numbered = _NAMED_PARAMETER.sub(lambda m: names.append(m.group(1)) or f"${len(names)}", sql)
        if self._glance_pool is None:
            async with self._glance_pool_lock:
                if self._glance_pool is None:
                    self._glance_pool = await asyncpg.create_pool(
                        self._postgres_url, min_size=1, max_size=GLANCE_CONNECTIONS, reset=_keep_session,
                        timeout=self._connect_timeout_s)
        # A query cut short (a cancelled request too) costs its connection only: the pool replaces it.
        return [tuple(row) for row in await self._glance_pool.fetch(numbered, *(params[name] for name in names))]

    async def _close_glance(self) -> None:
        glance, self._glance = self._glance, None
        rows, self._sqlite_rows = self._sqlite_rows, None
        if rows is not None:
            rows.dispose()
        if glance is not None:
            glance.close()

    def kept(self, channel: str) -> KeptReads:
        """The reads kept for `channel`'s notices. On PostgreSQL the first call starts listening, in the background,
        and a later one starts again after the listening connection was lost; on SQLite nothing is ever kept."""
        kept = self._kept.get(channel)
        if kept is None:
            kept = self._kept[channel] = KeptReads()
        if (self._postgres_url is not None and channel not in self._listeners
                and time.monotonic() >= self._listen_after.get(channel, 0.0)):
            task = asyncio.get_running_loop().create_task(self._listen(channel, kept), name=f"listen {channel}")
            self._listeners[channel] = task
            task.add_done_callback(lambda _task: self._listeners.pop(channel, None))
        return kept

    async def _listen(self, channel: str, kept: KeptReads) -> None:
        connection: asyncpg.Connection | None = None
        taking: asyncio.Task | None = None
        try:
            connection = await asyncpg.connect(self._postgres_url, timeout=self._connect_timeout_s,
                                               server_settings={"application_name": f"codreamer listen {channel}"})
            lost, heard, notices = asyncio.Event(), asyncio.Event(), asyncio.Queue()

            def stop_keeping(_connection: asyncpg.Connection) -> None:  # at once: a read must not wait for this task
                kept.listening = False
                lost.set()

            connection.add_termination_listener(stop_keeping)
            await connection.add_listener(
                channel, lambda _connection, _pid, _channel, payload: heard.set() if payload == _PROBE else notices.put_nowait(payload))
            taking = asyncio.get_running_loop().create_task(self._take(kept, notices), name=f"take {channel}")
            taking.add_done_callback(lambda _task: lost.set())  # notices no longer taken: stop keeping
            await self._hear_probe(channel, heard)
            kept.changed(None)
            kept.listening = True
            self._listen_failures[channel] = 0
            while not lost.is_set():
                try:
                    await asyncio.wait_for(lost.wait(), LISTEN_CHECK_S)
                except TimeoutError:
                    await self._hear_probe(channel, heard)
            if taking.done():
                taking.result()  # its failure, for the log line below
        except Exception as exc:  # whatever it was, reads go to the database meanwhile
            failures = self._listen_failures[channel] = self._listen_failures.get(channel, 0) + 1
            retry_s = min(LISTEN_RETRY_S * 2 ** (failures - 1), LISTEN_RETRY_MAX_S)
            log.info("listening on %s stopped (%s); reads of it go to the database, the next try in %.0f s",
                     channel, describe(exc), retry_s)
            self._listen_after[channel] = time.monotonic() + retry_s
        finally:
            kept.listening = False
            if taking is not None:
                taking.cancel()
            kept.changed(None)
            if connection is not None:
                connection.terminate()

    @staticmethod
    async def _take(kept: KeptReads, notices: asyncio.Queue) -> None:
        """Takes the notices one by one, in the order of their commits."""
        while True:
            await kept.announced(await notices.get())

    async def _hear_probe(self, channel: str, heard: asyncio.Event) -> None:
        """Sends a notice from another connection and waits to hear it: a listener that is there but deaf (a silent
        connection, a pooler that drops notices) would otherwise keep reads forever."""
        heard.clear()
        await self._glance_postgres("SELECT pg_notify(:channel, :probe)", {"channel": channel, "probe": _PROBE})
        try:
            await asyncio.wait_for(heard.wait(), LISTEN_CHECK_S)
        except TimeoutError:
            raise TimeoutError(f"a notice on {channel} did not arrive within {LISTEN_CHECK_S:g} s") from None

    async def _close(self, session: AsyncSession | AsyncConnection) -> None:
        """Hands the session's connection back to the pool even when the caller is cancelled meanwhile.

        The pool resets a returned connection with a rollback; a cancellation landing in that rollback (a workflow
        interrupted at shutdown) makes SQLAlchemy log a traceback and abandon the connection. Shielded, the close
        finishes on its own, and `close()` waits for any still finishing before it disposes of the engine. A commit
        hands its connection back as well, so it is shielded the same way (`transaction`).
        """
        await self._uninterrupted(session.close())

    async def _uninterrupted(self, handing_back: Awaitable) -> None:
        closing = asyncio.ensure_future(handing_back)
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)
        await asyncio.shield(closing)

    def problem(self) -> str | None:
        """Why the embedded database cannot take writes now (its disk is full), for readiness; None otherwise.

        A full disk fails every write while reads go on working, so `SELECT 1` alone would say ready.
        """
        if self._sqlite_folder is None:
            return None  # PostgreSQL reports its own disk trouble as an error readiness already sees
        try:
            free = shutil.disk_usage(self._sqlite_folder).free
        except OSError as exc:
            return f"the database's folder {self._sqlite_folder} cannot be read: {exc.strerror}"
        if free < MIN_FREE_DISK_BYTES:
            return (f"the disk holding the database ({self._sqlite_folder}) is full: {free // 1024} KiB free, "
                    f"{MIN_FREE_DISK_BYTES // 1024 // 1024} MiB needed; runs cannot record their progress")
        return None

    async def close(self) -> None:
        listeners = list(self._listeners.values())
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        await self._close_glance()
        if self._glance_pool is not None:
            self._glance_pool.terminate()
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=CLOSE_WAIT_S)
        await self.engine.dispose()
        if self._read_engine.sync_engine.pool is not self.engine.sync_engine.pool:
            await self._read_engine.dispose()
