"""A worker's PostgreSQL pool keeps the connections its runs use at once, instead of opening and closing one per use.

With 20 runs on one worker, the pool kept 10 and closed each connection past them on its return: five new
PostgreSQL backends a second, a third of the database's CPU, and checkouts that waited once 30 were out.
"""

import asyncio

from sqlalchemy import event, text

from app.kit.db import Database
from app.kit.settings import RUN_CONNECTIONS, Settings

WORKER_CONCURRENCY = 8
ROUNDS = 5


async def test_a_worker_opens_what_its_runs_hold_at_once_then_keeps_it(postgres_url):
    settings = Settings(_env_file=None, database_url=postgres_url, worker_concurrency=WORKER_CONCURRENCY)
    assert settings.database_pool_size == RUN_CONNECTIONS * WORKER_CONCURRENCY
    db = Database(settings)
    opened = 0

    @event.listens_for(db.engine.sync_engine, "connect")
    def _count(_connection, _record):
        nonlocal opened
        opened += 1

    async def stage() -> None:  # one stage of a run, in a transaction, while every other one is in its own
        async with db.transaction() as session:
            await session.execute(text("SELECT pg_sleep(0.05)"))

    try:
        busiest = RUN_CONNECTIONS * WORKER_CONCURRENCY
        await asyncio.gather(*(stage() for _ in range(busiest)))
        assert opened == busiest
        for _ in range(ROUNDS):
            await asyncio.gather(*(stage() for _ in range(busiest)))
        assert opened == busiest, f"{opened - busiest} connections opened again in {ROUNDS} rounds"
    finally:
        await db.close()


def test_the_pool_size_default_follows_the_worker_concurrency_unless_set():
    assert Settings(_env_file=None).database_pool_size == 10  # the default 2 runs at once fit in 10
    assert Settings(_env_file=None, worker_concurrency=20).database_pool_size == 40
    assert Settings(_env_file=None, worker_concurrency=20, database_pool_size=3).database_pool_size == 3
