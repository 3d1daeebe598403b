"""The import contracts fail the build when one is breached: lint-imports in its own process, on a copy of the package
with one deliberate import added (tests/unit/test_architecture.py checks the package as it is)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from importlinter.cli import EXIT_STATUS_SUCCESS

ROOT = Path(__file__).resolve().parents[2]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"

BREACHES = {
    # a module added where the contract names a layer or a package, or a line added to a module it names
    "upward": ("app/knowledge_graph/breach.py", "from app.runs import models\n",
               "Each layer imports only the layers below it", "app.knowledge_graph.breach -> app.runs.models"),
    "api_imports_art": ("app/ui/endpoints.py", "import art  # noqa: E402\n",
                        "The API process never imports", "app.ui.endpoints -> art"),
    "api_reaches_a_workflow": ("app/policies/endpoints.py", "from app.drafts import workflow  # noqa: E402\n",
                               "The API process never imports", "app.policies.endpoints -> app.drafts.workflow"),
    "kit_imports_a_domain": ("app/kit/breach.py", "from app.events import models\n",
                             "Statistics and plumbing import no domain", "app.kit.breach -> app.events.models"),
    "stats_imports_a_domain": ("app/stats/breach.py", "from app.policies import schemas\n",
                               "Statistics and plumbing import no domain", "app.stats.breach -> app.policies.schemas"),
    "workflows_depend": ("app/evaluations/workflow.py", "from app.drafts import workflow as batches  # noqa: E402\n",
                         "The three durable workflows are independent", "app.evaluations.workflow -> app.drafts.workflow"),
}


@pytest.mark.parametrize("breach", BREACHES)
def test_a_breached_contract_fails_the_check(tmp_path, breach):
    path, line, contract, chain = BREACHES[breach]
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__", "_alembic"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    module = tmp_path / path
    module.write_text((module.read_text() + "\n" if module.exists() else "") + line)
    result = subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": ""}, timeout=120)
    assert result.returncode != EXIT_STATUS_SUCCESS
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and chain in broken, result.stdout
