"""The README's curl walk-through, pasted as one block into bash against a live `codreamer serve` (the runnable
blocks of the pages under docs/ are run by tests/e2e/test_docs_blocks.py)."""

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
