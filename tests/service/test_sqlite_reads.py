"""On SQLite, the reads that render a run's view and its iterations run in the event loop's own thread (issue 20).

A trip to aiosqlite's thread and back is two wake-ups; while runs kept the machine's 2 cores busy, each could wait
milliseconds, and the polls that rendered (about 1 in 100) set the API's p99. Read in the loop's thread, a render
never yields: a task scheduled before it has not run when it returns.
"""

import asyncio
import sqlite3
import threading
from datetime import UTC, datetime

from sqlalchemy import select

from app.kit.db import Database
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.main import create_app
from app.runs import repository
from app.runs.models import Iteration
from tests.support import connect, lifespan

BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 3}


async def _yielded(read) -> tuple[bool, object]:
    """Whether `read` let the event loop run another task, and what it returned."""
    ran = asyncio.Event()
    other = asyncio.get_running_loop().create_task(asyncio.sleep(0))
    other.add_done_callback(lambda _task: ran.set())
    result = await read()
    yielded = ran.is_set()
    await other
    return yielded, result


async def test_a_run_s_view_and_iterations_are_read_without_leaving_the_event_loop_s_thread(tmp_path):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/codreamer.sqlite", environment="test",
                        secret_key="sqlite-reads-tests-key", run_worker=False)
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        run_id = (await client.post("/learn-loop", json=BODY)).json()["run_id"]
        db: Database = app.state.services.db
        started = datetime(2026, 11, 25, 7, 0, 1, 123456, tzinfo=UTC)
        async with db.transaction() as session:
            session.add(Iteration(run_id=run_id, iteration=0, email={"subject": "Hi", "body": "Hello"}, rewards=None,
                                  training=None, node_scores_changed={"n1": 0.5}, metrics={"rollouts": 2},
                                  started_at=started, finished_at=started, extra={"added_later": [1, 2]}))

        yielded, views = await _yielded(lambda: repository.run_views(db, [run_id]))
        assert not yielded
        async with db.read() as session:  # the same row through a session: the same types (aware datetimes, JSON)
            assert views == {run_id: await repository.get_run_view(session, run_id)}
            stored = (await session.scalars(select(Iteration).where(Iteration.run_id == run_id))).all()

        yielded, iterations = await _yielded(lambda: repository.iterations(db, run_id))
        assert not yielded
        assert iterations == [Iteration.view(row) for row in stored]
        assert iterations[0]["started_at"] == started and iterations[0]["added_later"] == [1, 2]

        response = await client.get(f"/runs/{run_id}/iterations")
        assert response.status_code == 200 and response.json()["data"][0]["iteration"] == 0


async def test_a_locked_sqlite_file_is_read_through_the_pool_once_it_is_free(tmp_path):
    """The loop's thread never waits for a lock: the read goes to the pool, which waits, and the loop runs meanwhile."""
    path = tmp_path / "codreamer.sqlite"
    settings = Settings(_env_file=None, database_url=f"sqlite:///{path}", environment="test",
                        secret_key="sqlite-reads-tests-key", run_worker=False)
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        run_id = (await client.post("/learn-loop", json=BODY)).json()["run_id"]

    # Under WAL, a connection in exclusive locking mode is the one way to keep readers out; it can take that lock
    # only while no other connection has the file open, so the database is opened after it.
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE runs SET status = 'cancelled' WHERE id = ?", (run_id,))
    release = threading.Timer(0.5, lambda: (holder.execute("COMMIT"), holder.close()))
    db = Database(settings)
    try:
        release.start()
        yielded, views = await _yielded(lambda: repository.run_views(db, [run_id]))
        assert yielded and views[run_id]["status"] == "cancelled"

        yielded, views = await _yielded(lambda: repository.run_views(db, [run_id]))
        assert not yielded and views[run_id]["status"] == "cancelled"  # back in the loop's thread
    finally:
        release.join()
        await db.close()
