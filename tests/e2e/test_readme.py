"""The README's curl walk-through, pasted as one block into bash against a live `codreamer serve`."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import Server, wait_for_status

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def walk_through() -> str:
    """The first bash block under the README's walk-through heading, as a reader would copy it."""
    section = (ROOT / "README.md").read_text().split("## A curl walk-through", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_walk_through_runs_as_one_block_and_keeps_its_run(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "example-graph.json", tmp_path / "docs")
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite"}).start()
    try:
        block = walk_through().replace("localhost:8000", f"127.0.0.1:{server.port}")
        # -e: any failed command (curl -f fails on an error status) stops the block; pipefail: inside pipes too
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        run_id = result.stdout.splitlines()[0]
        assert run_id.startswith("run_")
        assert "event: run.succeeded" in result.stdout and result.stdout.count("event: iteration.completed") == 4
        assert re.search(rf"^5 {run_id}\.jsonl$", result.stdout, re.M), result.stdout[-2000:]
        assert re.search(r"^304$", result.stdout, re.M), result.stdout[-2000:]  # the conditional read
        again = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0 and again.stdout.splitlines()[0] == run_id  # pasted twice: the same run
        with server.client() as client:
            runs = client.get("/runs").json()["data"]
        assert [run["run_id"] for run in runs] == [run_id] and runs[0]["status"] == "succeeded"  # kept for the dashboard
    finally:
        server.stop()


def outcomes_block() -> str:
    section = (ROOT / "README.md").read_text().split("## Learning from real outcomes", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_outcomes_block_reports_both_ways_and_reads_them_back(tmp_path):
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite"}).start()
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2,
                                                      "scenario_ids": ["scn-healthcare-cto"]}).json()["run_id"]
            wait_for_status(client, run_id)
        block = outcomes_block().replace("localhost:8000", f"127.0.0.1:{server.port}")
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120, env={"PATH": "/usr/bin:/bin", "RUN": run_id})
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        assert answers[0] == {"accepted": 2, "duplicates": 0, "unattributed": 0}
        assert answers[1] == {"accepted": 1, "duplicates": 0, "unattributed": 0}
        with server.client() as client:
            ref = client.get(f"/runs/{run_id}/iterations/1").json()["email"]["ref"]
        [email] = [e for e in answers[2]["data"] if e["ref"] == ref]
        assert email["sends"] == 52 and email["replies"] >= 1 and email["positive_replies"] >= 1  # 50 simulated and 2 yours
    finally:
        server.stop()
