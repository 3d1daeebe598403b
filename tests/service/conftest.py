"""Fixtures of the in-process service tests."""

import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from app.kit.settings import Settings
from app.knowledge_graph.schemas import GraphDocument
from app.lifecycle.local import add_graph, local_service, run_to_end
from app.main import create_app
from app.runs import repository
from app.runs.schemas import LearnLoopRequest
from tests.support import FreshPostgresDatabase, connect, lifespan, require_postgres


@pytest.fixture
def postgres_url():
    """A PostgreSQL database of the test's own, dropped afterwards (skipped where none runs, except on CI)."""
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        yield database.url
    finally:
        database.drop()


@asynccontextmanager
async def _api_node(database_url: str, body: dict):
    app = create_app(Settings(_env_file=None, database_url=database_url, environment="test", secret_key="api-node-tests-key",
                              run_worker=False))
    async with lifespan(app), connect(app) as client:
        yield client, app.state.services.db, (await client.post("/learn-loop", json=body)).json()["run_id"]


@pytest.fixture
def api_node():
    """`async with api_node(database_url, body) as (client, db, run_id)`: an API node in the test's process, without a
    run worker (its commits would change what the test watches), and one run queued with `body`."""
    return _api_node


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh database of each kind in turn: a SQLite file, or a PostgreSQL database of the test's own."""
    return f"sqlite:///{tmp_path}/db.sqlite" if request.param == "sqlite" else request.getfixturevalue("postgres_url")


@dataclass
class LearnedRun:
    """A finished run as the API shows it: the run, and each iteration with its trajectories."""

    run: dict
    iterations: list[dict]

    def rewards(self, iteration: int) -> float:
        return self.iterations[iteration]["rewards"]["mean"]


@pytest.fixture
def learn(tmp_path):
    """Runs a learning loop through the service's own workflow, in-process, on a fresh SQLite database."""

    async def learn(request: LearnLoopRequest, document: GraphDocument | None = None, **settings) -> LearnedRun:
        data_dir = tmp_path / uuid.uuid4().hex[:8]
        async with local_service(data_dir, Settings(_env_file=None, **settings)) as process:
            if document is not None:
                await add_graph(process, document)
            run = await run_to_end(process, request)
            async with process.api.db.read() as session:
                details = [await repository.iteration_detail(session, run["run_id"], i["iteration"])
                           for i in await repository.iterations(process.api.db, run["run_id"])]
        return LearnedRun(run, details)

    return learn
