"""`GET /runs/{id}/node-scores`: one scenario's map with `scenario_id`, else the mean over the run's
scenarios; `?iteration=k` with either; webhooks carry the run-wide map. In process, over ASGI."""

import math

import pytest
from sqlalchemy import select

from app.kit.settings import Settings
from app.lifecycle.local import local_service, run_to_end
from app.main import create_app
from app.runs.models import NodeScore, NodeScoreChange
from app.runs.schemas import LearnLoopRequest
from tests.support import connect

pytestmark = pytest.mark.slow


async def test_node_scores_per_scenario_and_for_the_run(tmp_path):
    settings = Settings(_env_file=None, environment="test")
    async with local_service(tmp_path, settings) as process:
        graph = await process.api.graphs.get("demo")
        scenarios = list(graph.scenarios)[:2]
        run = await run_to_end(process, LearnLoopRequest(iterations=3, rollouts_per_group=4, seed=0, scenario_ids=scenarios))
        assert run["status"] == "succeeded", run
        run_id = run["run_id"]
        async with process.api.db.read() as session:
            rows = (await session.execute(select(NodeScore.scenario_id, NodeScore.node_id, NodeScore.score)
                                          .where(NodeScore.run_id == run_id))).all()
            changes = (await session.execute(select(NodeScoreChange).where(NodeScoreChange.run_id == run_id))).scalars().all()
        moved = {s: {n: v for sid, n, v in rows if sid == s} for s in scenarios}
        assert all(moved.values()), "both scenarios learned something in three iterations"
        assert {c.scenario_id for c in changes} == set(scenarios) and all(c.iteration >= 1 for c in changes)

        app = create_app(settings.model_copy(update={"database_url": process.api.settings.database_url}))
        app.state.services = process.api  # the started process's services: no second DBOS launch
        async with connect(app) as http:
            base = f"/runs/{run_id}/node-scores"
            for scenario in scenarios:
                body = (await http.get(base, params={"scenario_id": scenario})).json()
                assert body["iteration"] == 3 and body["scenario_id"] == scenario
                assert len(body["scores"]) == len(graph.nodes)
                assert body["scores"] == {n: moved[scenario].get(n, 1.0) for n in graph.nodes}

            run_wide = (await http.get(base)).json()
            assert run_wide["scenario_id"] is None and len(run_wide["scores"]) == len(graph.nodes)
            for node_id, score in run_wide["scores"].items():
                expected = math.sqrt(moved[scenarios[0]].get(node_id, 1.0) * moved[scenarios[1]].get(node_id, 1.0))
                assert score == pytest.approx(expected), node_id

            # ?iteration=k, alone and with a scenario: each (scenario, node)'s last change up to k.
            for k in (0, 1, 2, 3):
                for scenario in scenarios:
                    body = (await http.get(base, params={"iteration": k, "scenario_id": scenario})).json()
                    expected = {}
                    for change in sorted(changes, key=lambda c: c.iteration):
                        if change.scenario_id == scenario and change.iteration <= k:
                            expected[change.node_id] = change.score
                    assert body["iteration"] == k and body["scores"] == {n: expected.get(n, 1.0) for n in graph.nodes}
            assert set((await http.get(base, params={"iteration": 0})).json()["scores"].values()) == {1.0}
            assert (await http.get(base, params={"iteration": 3})).json()["scores"] == run_wide["scores"]

            # The run-wide map is what each iteration's event (and webhook) carries.
            events = (await http.get(f"/runs/{run_id}/events")).json()["data"]
            completed = {e["data"]["iteration"]: e["data"] for e in events if e["type"] == "iteration.completed"}
            for k, data in completed.items():
                assert data["node_scores"] == pytest.approx((await http.get(base, params={"iteration": k})).json()["scores"])
            iterations = (await http.get(f"/runs/{run_id}/iterations")).json()["data"]
            for record in iterations[1:]:
                at_k = (await http.get(base, params={"iteration": record["iteration"]})).json()["scores"]
                assert record["node_scores_changed"] == pytest.approx({n: at_k[n] for n in record["node_scores_changed"]})

            other = next(s for s in graph.scenarios if s not in scenarios)
            for params in ({"scenario_id": other}, {"scenario_id": "nope"}, {"scenario_id": scenarios[0], "iteration": 4}):
                response = await http.get(base, params=params)
                assert response.status_code == 404, params
                assert "not found" in response.json()["detail"]
            assert (await http.get(base, params={"scenario_id": ""})).status_code == 422
