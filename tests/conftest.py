import os

os.environ.setdefault("TQDM_DISABLE", "1")

import uuid  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import pytest  # noqa: E402

from app.backends.embedded import EmbeddedBackend  # noqa: E402
from app.knowledge_graph.schemas import GraphDocument  # noqa: E402
from app.local import add_graph, local_service, run_to_end  # noqa: E402
from app.runs import repository  # noqa: E402
from app.runs.schemas import LearnLoopRequest  # noqa: E402
from app.settings import Settings  # noqa: E402


@pytest.fixture
async def backend():
    backend = EmbeddedBackend()
    yield backend
    await backend.close()


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
                           for i in await repository.iterations(session, run["run_id"])]
        return LearnedRun(run, details)

    return learn
