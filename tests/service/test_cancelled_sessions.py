"""A task cancelled mid-transaction (a run interrupted at shutdown, and cancelled again on the way out) leaves the
pool as it found it, and SQLAlchemy logs no traceback: a commit once begun finishes, and a rollback and the
connection's hand-back run on their own, untouched by further cancellations."""

import asyncio
import logging

import pytest
from sqlalchemy import event, text

from app.kit.db import Database
from app.kit.settings import Settings

WRITES = 20


@pytest.fixture
async def db(database_url):
    db = Database(Settings(_env_file=None, database_url=database_url))
    async with db.transaction() as session:
        await session.execute(text("CREATE TABLE IF NOT EXISTS cancelled_writes (n INTEGER)"))
    try:
        yield db
    finally:
        async with db.transaction() as session:
            await session.execute(text("DROP TABLE IF EXISTS cancelled_writes"))
        await db.close()


async def cancelled_writes(db: Database, caplog, *on: tuple[object, str]) -> tuple[list[BaseException | None], int]:
    """WRITES transactions, one at a time, each cancelled at every event `on` (target, name) it meets; what each ended
    with and how many rows were written. Each write's hand-back finishes before the next begins."""
    writing: list[asyncio.Task] = []

    def cancel(*_):
        if writing and not writing[-1].done():
            writing[-1].cancel()  # lands in the task's next await: the one the event precedes

    async def write(n: int) -> None:
        async with db.transaction() as session:
            await session.execute(text("INSERT INTO cancelled_writes (n) VALUES (:n)"), {"n": n})

    for target, name in on:
        event.listen(target, name, cancel)
    ended = []
    try:
        with caplog.at_level(logging.ERROR):
            for n in range(WRITES):
                writing.append(asyncio.ensure_future(write(n)))
                ended += await asyncio.gather(writing[-1], return_exceptions=True)
                for _ in range(200):
                    if db.engine.sync_engine.pool.checkedout() == 0:
                        break
                    await asyncio.sleep(0.05)
    finally:
        for target, name in on:
            event.remove(target, name, cancel)
    assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], caplog.text[-2000:]
    assert db.engine.sync_engine.pool.checkedout() == 0
    async with db.read() as session:
        return ended, (await session.execute(text("SELECT count(*) FROM cancelled_writes"))).scalar_one()


async def test_a_transaction_cancelled_as_it_commits_and_hands_back_still_commits_and_logs_nothing(db, caplog):
    ended, written = await cancelled_writes(db, caplog, (db.engine.sync_engine, "commit"), (db.engine.sync_engine.pool, "reset"))
    assert all(isinstance(e, asyncio.CancelledError) for e in ended)
    assert written == WRITES  # each commit, once begun, finished


async def test_a_transaction_cancelled_as_it_writes_rolls_back_and_hands_back_and_logs_nothing(db, caplog):
    """Cancelled in its statement, again in its rollback and again as the connection goes back to the pool."""
    ended, written = await cancelled_writes(db, caplog, (db.engine.sync_engine, "before_cursor_execute"),
                                            (db.engine.sync_engine, "rollback"), (db.engine.sync_engine.pool, "reset"))
    assert all(isinstance(e, asyncio.CancelledError) for e in ended)
    assert written == 0
