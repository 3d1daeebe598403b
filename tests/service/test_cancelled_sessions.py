"""A task cancelled while its transaction commits or hands its connection back (a run interrupted at shutdown) leaves
the pool as it found it, and SQLAlchemy logs no traceback: the commit and the hand-back finish on their own."""

import asyncio
import logging

from sqlalchemy import text

from app.db import Database
from app.settings import Settings

CANCEL_POINTS = 120  # cancellations spread over a whole transaction's event-loop turns, so they land in each await


async def test_a_cancellation_anywhere_in_a_transaction_leaves_no_traceback_and_no_connection_out(database_url, caplog):
    db = Database(Settings(_env_file=None, database_url=database_url))
    try:
        async with db.transaction() as session:
            await session.execute(text("CREATE TABLE IF NOT EXISTS cancelled_writes (n INTEGER)"))

        async def write(n: int) -> None:
            async with db.transaction() as session:
                await session.execute(text("INSERT INTO cancelled_writes (n) VALUES (:n)"), {"n": n})

        async def turns_to(task: asyncio.Future, cancel_at: int | None = None) -> int:
            turns = 0
            while not task.done():
                if cancel_at is not None and turns >= cancel_at and (turns - cancel_at) % 50 == 0:
                    task.cancel()  # and again while it unwinds: a shutdown cancels what it waits for once more
                await asyncio.sleep(0)
                turns += 1
            return turns

        whole = await turns_to(asyncio.ensure_future(write(-1)))  # SQLite's thread hops take thousands
        with caplog.at_level(logging.ERROR, logger="sqlalchemy.pool"):
            for point in range(CANCEL_POINTS):
                await turns_to(asyncio.ensure_future(write(point)), cancel_at=point * whole // CANCEL_POINTS)
            await asyncio.sleep(0.2)  # the hand-backs still finishing
        assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], caplog.text[-2000:]
        assert db.engine.sync_engine.pool.checkedout() == 0
        async with db.read() as session:  # every write either committed whole or not at all, and the table answers
            written = (await session.execute(text("SELECT count(*) FROM cancelled_writes"))).scalar_one()
        assert 1 < written <= CANCEL_POINTS + 1
    finally:
        async with db.transaction() as session:
            await session.execute(text("DROP TABLE IF EXISTS cancelled_writes"))
        await db.close()
