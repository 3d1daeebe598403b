"""Every runnable block of the docs: each page's `bash` blocks, pasted in order into one `bash -euo pipefail` against a
live `codreamer serve`, as a reader would paste them into a terminal (`console` blocks are shown, not run; the
README's walk-through has its own test, tests/e2e/test_readme.py). A page with runnable blocks is run whether or not
it has checks of its own below; the checks say what its answers must be."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import Server

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def runnable_blocks(path: Path) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```$", path.read_text(), re.M | re.S)


PAGES = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if runnable_blocks(path))


def answers(stdout: str) -> list:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith(("{", "["))]


def check_getting_started(stdout: str) -> None:
    health, ready, judges = answers(stdout)[:3]
    assert health == {"status": "ok"} and ready == {"status": "ready"}
    assert {"default", "embedded"} <= {judge["name"] for judge in judges["data"]}
    assert "scn-healthcare-cto" in stdout.splitlines()[-1].split()  # the demo's scenarios, one of them the README's


def check_runs(stdout: str) -> None:
    codes = [line for line in stdout.splitlines() if re.fullmatch(r"\d{3}", line)]
    assert codes == ["409", "409", "204", "404", "422"], stdout[-2000:]
    [invalid] = [answer for answer in answers(stdout) if "detail" in answer]
    assert invalid["detail"][0]["loc"] == ["body", "iterations"]


def check_knowledge_graphs(stdout: str) -> None:
    created, extra, dangling, node, by_type = answers(stdout)
    assert created == {"id": "my-graph", "name": "Acme Cold Chain", "nodes": 4, "edges": 3, "scenarios": 1}
    assert extra["detail"][0]["loc"] == ["body", "nodes", 0, "colour"]
    assert extra["detail"][0]["msg"] == "Extra inputs are not permitted"
    assert dangling["detail"][0]["msg"] == "Value error, edges[3].target names unknown node 'nowhere'"
    assert {(n["id"], n["direction"]) for n in node["neighbors"]} == {
        ("company", "in"), ("case-freshco", "out"), ("feature-audit", "out")}
    assert [n["id"] for n in by_type["data"]] == ["case-freshco"]
    assert [line for line in stdout.splitlines() if re.fullmatch(r"\d{3}", line)] == ["422", "422"]


def check_outcomes(stdout: str) -> None:
    suppressed, suppression, reported, postmark, outcomes = answers(stdout)
    assert suppressed == {"suppressed": 1} and suppression["reason"] == "asked by phone" and suppression["until"] is None
    assert "204" in stdout.splitlines()
    assert reported == {"accepted": 2, "duplicates": 0, "unattributed": 0}
    assert postmark == {"accepted": 1, "duplicates": 0, "unattributed": 0}
    [email] = [e for e in outcomes["data"] if e["iteration"] == 1]
    assert email["sends"] == 52 and email["replies"] >= 1 and email["positive_replies"] >= 1  # 50 simulated and 2 yours


CHECKS = {
    "guide/getting-started.md": check_getting_started,
    "guide/runs.md": check_runs,
    "guide/knowledge-graphs.md": check_knowledge_graphs,
    "guide/outcomes.md": check_outcomes,
}


def test_the_checked_pages_are_the_pages_with_runnable_blocks():
    assert sorted(CHECKS) == PAGES


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("docs-server")
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite"}).start()
    yield server
    server.stop()


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_runnable_blocks_run_in_order_against_a_live_server(server, tmp_path, page):
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("*.md", "*.py", "*.png"))  # the files blocks read
    script = "\n".join(runnable_blocks(DOCS / page)).replace("localhost:8000", f"127.0.0.1:{server.port}")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    CHECKS.get(page, lambda stdout: None)(result.stdout)
