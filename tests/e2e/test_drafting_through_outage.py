"""A PostgreSQL stopped for 15 s mid-batch loses no prospect: the batch and an evaluation beside it wait out the
outage (their steps re-run through it) and succeed, every prospect drafted exactly once. The drill stops a cluster
of its own (`PrivateCluster`), never the machine's. `python -m bench fairness` runs it ten times."""

import pytest

from tests.drills import outage_round
from tests.support import PrivateCluster, Server, wait_for_status

pytestmark = pytest.mark.slow
RUN = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo", "scn-healthcare-cto"], "max_turns": 4,
       "feedback_source": "none"}


def test_a_database_stopped_mid_batch_loses_no_prospect(tmp_path):
    cluster = PrivateCluster()
    server = None
    try:
        server = Server(tmp_path, {"DATABASE_URL": cluster.url, "EXECUTOR_ID": "outage-drill"}).start(timeout=180)
        with server.client() as client:
            run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
            assert wait_for_status(client, run_id, timeout=240)["status"] == "succeeded"
            found = outage_round(client, cluster, f"{run_id}@1", count=150, evaluations=1, stop_s=15)
            assert found.exactly_once, found
            assert found.drafted_before_stop < found.prospects  # stopped mid-batch
            assert found.evaluations == ["succeeded"], found
    finally:
        if server is not None:
            server.stop()
        cluster.remove()
