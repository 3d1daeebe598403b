import os

os.environ.setdefault("TQDM_DISABLE", "1")

import pytest  # noqa: E402

from app.backends.embedded import EmbeddedBackend  # noqa: E402
from app.loop.engine import run_learning_loop  # noqa: E402
from app.backends.registry import create_model  # noqa: E402
from app.loop.runtime import create_feedback, create_judge  # noqa: E402
from app.settings import Settings  # noqa: E402


@pytest.fixture
async def backend():
    backend = EmbeddedBackend()
    yield backend
    await backend.close()


@pytest.fixture
def learn(tmp_path, monkeypatch):
    """Runs a whole learning loop on a fresh embedded backend."""
    monkeypatch.chdir(tmp_path)  # ART writes its logs under ./.art

    async def learn(config, graph, *, run_id="test", **options):
        backend = EmbeddedBackend()
        try:
            settings = Settings(_env_file=None)
            return await run_learning_loop(
                config, backend=backend, model=create_model("embedded", settings, run_id), graph=graph,
                judge=create_judge(settings, backend), feedback=create_feedback(graph), **options,
            )
        finally:
            await backend.close()

    return learn
