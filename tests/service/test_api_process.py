"""An API-only process (`RUN_WORKER=false`, and `codreamer serve`'s API beside its worker child) launches no DBOS:
DBOS's threads would take its interpreter from requests. It reaches runs' workflows through DBOS's client."""

import pytest
from dbos import DBOSClient, _dbos

from app import tasks
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.lifecycle.api import dbos_database_url
from app.main import create_app
from tests.support import connect, lifespan

SCENARIO = demo_document().scenarios[0].id


@pytest.fixture
async def api(database_url):
    settings = Settings(_env_file=None, database_url=database_url, environment="test", run_worker=False,
                        secret_key="api-process-tests-secret-key")
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        yield client, settings


async def test_an_api_only_process_launches_no_dbos_yet_enqueues_and_cancels_runs_in_its_queue(api):
    client, settings = api
    assert _dbos._dbos_global_instance is None
    run_id = (await client.post("/learn-loop", json={"iterations": 1, "scenario_ids": [SCENARIO]})).json()["run_id"]
    dbos = DBOSClient(system_database_url=dbos_database_url(settings))
    try:
        [queued] = await dbos.list_workflows_async(workflow_ids=[run_id])
        assert (queued.status, queued.queue_name, queued.app_version) == ("ENQUEUED", tasks.RUNS.name, tasks.APPLICATION_VERSION)
        assert (await client.post(f"/runs/{run_id}/cancel")).status_code == 202
        [cancelled] = await dbos.list_workflows_async(workflow_ids=[run_id])
        assert cancelled.status == "CANCELLED"
    finally:
        dbos.destroy()
