"""A task cancelled mid-transaction (a run interrupted at shutdown, and cancelled again on the way out) leaves the
pool as it found it, and SQLAlchemy logs no traceback: a commit once begun finishes, and a rollback and the
connection's hand-back run on their own, untouched by further cancellations."""

import asyncio
import logging

from sqlalchemy import event, text

from app.db import Database
from app.settings import Settings

WRITES = 20


async def test_a_transaction_cancelled_as_it_commits_and_hands_back_still_commits_and_logs_nothing(database_url, caplog):
    db = Database(Settings(_env_file=None, database_url=database_url))
    writing: list[asyncio.Task] = []  # the write in flight, cancelled by the events below

    @event.listens_for(db.engine.sync_engine, "commit")
    def _cancel_as_it_commits(_connection):
        if writing:
            writing[-1].cancel()  # lands in the commit's next await

    @event.listens_for(db.engine.sync_engine.pool, "reset")
    def _cancel_again_as_it_hands_back(*_):
        if writing and not writing[-1].done():
            writing[-1].cancel()

    async def write(n: int) -> None:
        async with db.transaction() as session:
            await session.execute(text("INSERT INTO cancelled_writes (n) VALUES (:n)"), {"n": n})

    try:
        async with db.transaction() as session:
            await session.execute(text("CREATE TABLE IF NOT EXISTS cancelled_writes (n INTEGER)"))
        with caplog.at_level(logging.ERROR):
            for n in range(WRITES):
                writing.append(asyncio.ensure_future(write(n)))
                results = await asyncio.gather(writing[-1], return_exceptions=True)
                assert isinstance(results[0], asyncio.CancelledError)
                for _ in range(200):  # its commit and hand-back finishing on their own, before the next write
                    if db.engine.sync_engine.pool.checkedout() == 0:
                        break
                    await asyncio.sleep(0.05)
            writing.clear()
        assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], caplog.text[-2000:]
        assert db.engine.sync_engine.pool.checkedout() == 0
        async with db.read() as session:
            written = (await session.execute(text("SELECT count(*) FROM cancelled_writes"))).scalar_one()
        assert written == WRITES  # each commit, once begun, finished
    finally:
        event.remove(db.engine.sync_engine, "commit", _cancel_as_it_commits)
        event.remove(db.engine.sync_engine.pool, "reset", _cancel_again_as_it_hands_back)
        async with db.transaction() as session:
            await session.execute(text("DROP TABLE IF EXISTS cancelled_writes"))
        await db.close()



async def test_a_transaction_cancelled_as_it_writes_rolls_back_and_hands_back_and_logs_nothing(database_url, caplog):
    """Cancelled in its statement, again in its rollback and again as the connection goes back to the pool."""
    db = Database(Settings(_env_file=None, database_url=database_url))
    writing: list[asyncio.Task] = []

    def cancel(*_):
        if writing and not writing[-1].done():
            writing[-1].cancel()

    async def write(n: int) -> None:
        async with db.transaction() as session:
            await session.execute(text("INSERT INTO cancelled_writes (n) VALUES (:n)"), {"n": n})

    try:
        async with db.transaction() as session:
            await session.execute(text("CREATE TABLE IF NOT EXISTS cancelled_writes (n INTEGER)"))
        for target, name in ((db.engine.sync_engine, "before_cursor_execute"), (db.engine.sync_engine, "rollback"),
                             (db.engine.sync_engine.pool, "reset")):
            event.listen(target, name, cancel)
        with caplog.at_level(logging.ERROR):
            for n in range(WRITES):
                writing.append(asyncio.ensure_future(write(n)))
                await asyncio.gather(writing[-1], return_exceptions=True)
                for _ in range(200):
                    if db.engine.sync_engine.pool.checkedout() == 0:
                        break
                    await asyncio.sleep(0.05)
            writing.clear()
        assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], caplog.text[-2000:]
        assert db.engine.sync_engine.pool.checkedout() == 0
        async with db.read() as session:
            assert (await session.execute(text("SELECT count(*) FROM cancelled_writes"))).scalar_one() == 0
    finally:
        for target, name in ((db.engine.sync_engine, "before_cursor_execute"), (db.engine.sync_engine, "rollback"),
                             (db.engine.sync_engine.pool, "reset")):
            if event.contains(target, name, cancel):
                event.remove(target, name, cancel)
        async with db.transaction() as session:
            await session.execute(text("DROP TABLE IF EXISTS cancelled_writes"))
        await db.close()
