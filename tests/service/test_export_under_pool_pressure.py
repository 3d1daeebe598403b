"""Concurrent exports through a small pool are complete or refused up front, never cut (issue 18).

The export used to take a connection per iteration while streaming: under pool pressure a later
one timed out after the 200 had gone out, and the client silently got a truncated file.
"""

import asyncio
import logging

import httpx

from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.main import create_app
from tests.support import connect, finished, lifespan

EXPORTS = 400
ROUNDS = 3  # a cut needs unlucky timing: each round is another chance for one
BODY = {"iterations": 3, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 4}


async def test_concurrent_exports_are_whole_or_refused_before_any_byte(postgres_url, caplog):
    settings = Settings(_env_file=None, database_url=postgres_url, environment="test", secret_key="export-tests-secret-key")
    app = create_app(settings)
    async with lifespan(app), connect(app) as api:
        run_id = (await api.post("/learn-loop", json=BODY)).json()["run_id"]
        assert (await finished(api, run_id, timeout=600))["status"] == "succeeded"
        whole = (await api.get(f"/runs/{run_id}/export")).content
    assert whole.count(b"\n") == 1 + 4  # the run, then iterations 0..3

    # An API-only process whose pool has one connection, and waits 0.1 s for it.
    tight = create_app(settings.model_copy(update={
        "run_worker": False, "database_pool_size": 1, "database_max_overflow": 0, "database_pool_timeout_s": 0.1}))
    caplog.set_level(logging.WARNING)
    async with lifespan(tight), connect(tight) as api:

        async def export(n: int) -> httpx.Response:
            await asyncio.sleep(n * 0.003)  # arriving one after another: new ones compete with exports under way
            return await api.get(f"/runs/{run_id}/export")

        answers = []
        for _ in range(ROUNDS):
            answers += await asyncio.gather(*(export(n) for n in range(EXPORTS)), return_exceptions=True)

    cut = [a for a in answers if not isinstance(a, httpx.Response)]  # the app failed after its answer began
    assert not cut, cut[:3]
    assert {a.status_code for a in answers} <= {200, 503}
    for answer in answers:
        if answer.status_code == 200:
            assert answer.content == whole
        else:
            assert answer.headers["content-type"] == "application/json" and answer.headers["retry-after"]
    assert any(a.status_code == 200 for a in answers)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
