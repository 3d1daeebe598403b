"""A run's iterations list renders only the iterations recorded since its last render (issue 20).

Each new version of a run (every event it publishes) rendered its whole iterations list again for the next poll:
2.2 ms of the API's CPU at 59 iterations, growing with the run. A recorded iteration never changes, so the items
already rendered are kept and only the new ones are read and rendered; the answer stays byte for byte the whole
list's.
"""

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from app.kit.db import Database
from app.knowledge_graph.service import demo_document
from app.runs import repository
from app.runs.endpoints import RENDERED
from app.runs.models import Iteration, Run
from app.runs.schemas import IterationList

BODY = {"iterations": 5, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 3}


@pytest.fixture
async def api(api_node, database_url):
    """An API node (no worker: the test records iterations itself, as a worker would) with one run."""
    async with api_node(database_url, BODY) as node:
        yield node


async def record(db: Database, run_id: str, *iterations: int) -> None:
    """Records the iterations and moves the run to a new version, in one transaction."""
    at = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    async with db.transaction() as session:
        for n in iterations:
            session.add(Iteration(run_id=run_id, iteration=n, email={"subject": f"Email {n}", "body": "Hello"}, rewards=None,
                                  training=None, node_scores_changed={f"node-{n}": 0.1 * n}, metrics={"rollouts": 2.0},
                                  started_at=at, finished_at=at, extra={"trace_url": f"https://trace/{n}"}))
        await session.execute(update(Run).where(Run.id == run_id).values(last_seq=Run.last_seq + 1))


async def test_a_new_version_reads_and_renders_only_the_iterations_recorded_since(api, monkeypatch):
    client, db, run_id = api
    reads: list[tuple[int, list[int]]] = []
    whole = repository.iterations

    async def iterations(db: Database, run_id: str, after: int = -1) -> list[dict]:
        rows = await whole(db, run_id, after)
        reads.append((after, [row["iteration"] for row in rows]))
        return rows

    async def listed() -> bytes:
        """The list as answered, checked against the whole list rendered at once."""
        answer = await client.get(f"/runs/{run_id}/iterations")
        assert answer.status_code == 200
        assert answer.content == IterationList.model_validate({"data": await whole(db, run_id)}).model_dump_json().encode()
        return answer.content

    monkeypatch.setattr(repository, "iterations", iterations)
    await record(db, run_id, 0, 1)
    await listed()
    await record(db, run_id, 2)
    await listed()
    assert reads == [(-1, [0, 1]), (1, [2])]

    await record(db, run_id, 4)  # recorded before 3: the items kept stop before the gap
    await listed()
    await record(db, run_id, 3)
    assert [i["iteration"] for i in (await client.get(f"/runs/{run_id}/iterations")).json()["data"]] == [0, 1, 2, 3, 4]
    await record(db, run_id, 5)
    await listed()
    assert reads[2:] == [(2, [4]), (2, [3, 4]), (4, [5])]

    RENDERED.pop((run_id, "items", 5))  # let go of (the cache is bounded): the next version renders the list whole
    await record(db, run_id, 6)
    body = await listed()
    assert reads[-1] == (-1, [0, 1, 2, 3, 4, 5, 6]) and body.count(b'"iteration":') == 7


async def test_polls_of_a_new_version_at_once_share_one_render(api, monkeypatch):
    """A poll and the render ahead of a version's notice (PostgreSQL) arrive together: one read serves both."""
    client, db, run_id = api
    reads: list[int] = []
    whole = repository.iterations

    async def iterations(db: Database, run_id: str, after: int = -1) -> list[dict]:
        reads.append(after)
        return await whole(db, run_id, after)

    monkeypatch.setattr(repository, "iterations", iterations)
    await record(db, run_id, 0, 1)
    answers = await asyncio.gather(*(client.get(f"/runs/{run_id}/iterations") for _ in range(4)))
    assert {a.status_code for a in answers} == {200} and len({a.content for a in answers}) == 1
    assert len(reads) == 1
