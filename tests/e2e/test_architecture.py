"""The import contracts fail when an upward import is added: lint-imports in its own process, on a copy
of the package with one (tests/unit/test_architecture.py checks the package as it is)."""

import shutil
import subprocess
import sys
from pathlib import Path

from importlinter.cli import EXIT_STATUS_SUCCESS

ROOT = Path(__file__).resolve().parents[2]
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The knowledge graph sits below the runs domain: a graph module importing runs must fail the check."""
    shutil.copytree(ROOT / "app", tmp_path / "app", ignore=shutil.ignore_patterns("__pycache__", "_alembic"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    graph = tmp_path / "app" / "knowledge_graph" / "graph.py"
    graph.write_text(graph.read_text() + "\nfrom app.runs import models  # noqa: E402\n")
    result = subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": ""}, timeout=120)
    assert result.returncode != EXIT_STATUS_SUCCESS
    assert "app.knowledge_graph.graph -> app.runs.models" in result.stdout, result.stdout
