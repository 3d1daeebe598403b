"""Many live streams of one run cost one database query per poll, not one per stream (issue 18).

600 browser tabs on a run used to poll the database each on its own: the pool ran dry, streams
were cut mid-stream with pool-timeout tracebacks. Here 200 streams follow a real run on
PostgreSQL through a 2-connection pool.
"""

import asyncio
import json
import logging
import time

from sqlalchemy import event

from app.events import stream
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.main import create_app
from tests.support import connect, lifespan

STREAMS = 200
SSE = {"Accept": "text/event-stream"}
BODY = {"iterations": 2, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 4}


def sse_events(text: str) -> list[tuple[str, str, dict]]:
    """(id, event, data) of each event of a stream's body; comments skipped."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "data" in fields:
            found.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return found


async def test_two_hundred_streams_of_a_run_share_one_poller_and_all_get_every_event(postgres_url, caplog):
    settings = Settings(_env_file=None, database_url=postgres_url, environment="test", secret_key="fanout-tests-secret-key",
                        database_pool_size=2, database_max_overflow=0)
    app = create_app(settings)
    caplog.set_level(logging.WARNING)
    async with lifespan(app), connect(app) as api:
        engine = app.state.services.db.engine
        polls = 0

        def count(conn, cursor, statement, *args):
            nonlocal polls
            polls += statement.lstrip().upper().startswith("SELECT") and "FROM events" in statement

        event.listen(engine.sync_engine, "before_cursor_execute", count)
        run_id = (await api.post("/learn-loop", json=BODY)).json()["run_id"]
        started = time.monotonic()
        answers = await asyncio.gather(*(api.get(f"/runs/{run_id}/events", headers=SSE) for _ in range(STREAMS)))
        elapsed = time.monotonic() - started
        event.remove(engine.sync_engine, "before_cursor_execute", count)
        logged = (await api.get(f"/runs/{run_id}/events", params={"limit": 1000})).json()["data"]

    assert [a.status_code for a in answers] == [200] * STREAMS
    expected = [(str(e["seq"]), e["type"], e["data"]) for e in logged]
    assert expected[-1][1] == "run.succeeded"
    for answer in answers:
        assert sse_events(answer.text) == expected  # every event, in order, to the terminal one
    # One poller for the run: a query per poll (and per page), however many streams; a busy
    # machine polls less often, never more. 200 streams polling on their own made 200 per poll.
    assert polls <= elapsed / stream.POLL_INTERVAL_S + 10, (polls, elapsed)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
