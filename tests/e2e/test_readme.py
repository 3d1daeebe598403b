"""The README's curl walk-through, pasted as one block into bash against a live `codreamer serve` (the runnable
blocks of the pages under docs/ are run by tests/e2e/test_docs_blocks.py)."""

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import Server

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def walk_through() -> str:
    """The first bash block under the README's walk-through heading, as a reader would copy it."""
    section = (ROOT / "README.md").read_text().split("## A curl walk-through", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_walk_through_is_the_readmes_only_runnable_block():
    """A `bash` block is run by a test (a `console` one is shown only): another one in the README needs its test here."""
    assert re.findall(r"^```bash\n(.*?)^```$", (ROOT / "README.md").read_text(), re.M | re.S) == [walk_through()]


def test_the_walk_through_runs_as_one_block_and_keeps_its_run(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "example-graph.json", tmp_path / "docs")
    shutil.copy(ROOT / "docs" / "prospects.csv", tmp_path / "docs")
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
        answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        deployed = [a for a in answers if "history" in a]
        assert [d["policy"] for d in deployed] == [f"{run_id}@3", f"{run_id}@3"]  # the champion stays
        assert all(d["require_evidence"] for d in deployed)
        challenger = deployed[1]["challengers"][0]["policy"]
        assert [c["share"] for c in deployed[1]["challengers"]] == [0.2] and challenger.startswith("run_")
        [refused] = [a for a in answers if "detail" in a]  # the promotion the evidence does not carry yet
        assert re.search(r"^409$", result.stdout, re.M) and "evidence" in refused["detail"], refused
        assert {"accepted": 2, "duplicates": 0, "unattributed": 0} in answers
        [outcomes] = [a for a in answers if "data" in a and a["data"] and "prospect_id" in a["data"][0]]
        assert [(o["prospect_id"], o["delivered"], o["replies"]) for o in outcomes["data"]][0] == ("p1", 1, 1)
        with (tmp_path / "drafts.csv").open(newline="") as exported:
            drafts = list(csv.DictReader(exported))
        assert [(d["first_name"], d["last_name"]) for d in drafts] == [("Ines", "Duarte"), ("Tomasz", "Nowak"),
                                                                     ("Grace", "Mensah")]  # Instantly's names
        assert drafts[0]["linkedin_url"].startswith("https://") and drafts[0]["job_title"] == "CTO"  # custom: kept
        assert all(d["subject"] and d["body"] and d["message_id"].startswith("<eml_") for d in drafts)
        next_run = challenger.split("@")[0]
        [evaluation] = [a for a in answers if "evaluation_id" in a and "result" in a]
        assert evaluation["status"] == "succeeded" and evaluation["policies"] == [challenger, f"{run_id}@3"]
        assert all(p["held_out"] == 9 and p["judge"] for p in evaluation["result"]["policies"])
        again = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0 and again.stdout.splitlines()[0] == run_id  # pasted twice: the same runs
        with server.client() as client:
            runs = client.get("/runs").json()["data"]
            assert client.get(f"/runs/{next_run}").json()["config"]["init_from"] == run_id
        assert [run["run_id"] for run in runs] == [next_run, run_id]  # kept for the dashboard
        assert all(run["status"] == "succeeded" for run in runs)
    finally:
        server.stop()
