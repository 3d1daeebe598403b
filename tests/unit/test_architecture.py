"""Imports point one way: the layers in pyproject.toml's import-linter contracts, checked on every run
(tests/e2e/test_architecture.py shows the check failing on each kind of breach)."""

import re
import sys
import tomllib
from pathlib import Path

from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

from app import tasks  # at collection: importing DBOS runs `file`, a process

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_imports_only_the_layers_below_it():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == EXIT_STATUS_SUCCESS


def test_every_module_sits_in_a_layer():
    """A layer may name single modules of a package split across layers; a module added to such a package that no
    layer names would be held to nothing."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"] == "Each layer imports only the layers below it")["layers"]
    named = {name for layer in layers for name in re.split(r"\s*[|:]\s*", layer)}
    modules = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for path in (ROOT / "app").rglob("*.py") if "_alembic" not in path.parts}
    unplaced = {m for m in modules - {"app"}
                if not any(m == n or m.startswith(n + ".") for n in named)
                and not any(n.startswith(m + ".") for n in named)}  # a package whose modules are named one by one
    assert not unplaced, f"modules in no layer of the contract: {sorted(unplaced)}"


def test_every_durable_workflow_is_on_the_one_list():
    """A worker registers the workflows `app.tasks` lists by importing their modules: one declared anywhere else, or
    under a name of its own, would never run."""
    declared = {}
    for path in (ROOT / "app").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for found in re.finditer(r"@DBOS\.workflow\(name=tasks\.(\w+)\.name\)|@DBOS\.workflow\(", path.read_text()):
            assert found.group(1), f"{module}: a workflow not named from app.tasks"
            declared[found.group(1)] = module
    listed = {name: workflow for name, workflow in vars(tasks).items() if workflow in tasks.WORKFLOWS}
    assert {name: workflow.module for name, workflow in listed.items()} == declared
    assert tasks.APPLICATION_VERSION == "+".join(f"{w.name}-{w.version}" for w in tasks.WORKFLOWS)
    assert {w.queue for w in tasks.WORKFLOWS} <= set(tasks.QUEUES)


def _imports(path: Path) -> set[str]:
    import ast
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_world_and_the_learner_share_no_code():
    """The simulated readers (app.simulation) import nothing of the agent, the loop, the backends (composer, judge) or
    the outcome model's features, and only the demo's simulated provider reads them: the two import-linter contracts,
    checked here module by module so a breach names its file."""
    allowed_outside = {"numpy", "pydantic"}
    shapes = {"app.knowledge_graph.schemas"}  # a graph document's shape, for the generated graphs
    for path in (ROOT / "app" / "simulation").rglob("*.py"):
        for module in _imports(path):
            top = module.split(".")[0]
            assert module.startswith("app.simulation") or module in shapes or top in allowed_outside or top in sys.stdlib_module_names, \
                f"{path.relative_to(ROOT)} imports {module}"
    readers = {".".join(path.relative_to(ROOT).with_suffix("").parts) for path in (ROOT / "app").rglob("*.py")
               if "app.simulation" in {m[:14] for m in _imports(path)} and "simulation" not in path.parts}
    assert readers == {"app.outcomes.simulated", "app.outcomes.simulated_team"}
    names = [c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]]
    assert any(n.startswith("The world knows nothing of the learner") for n in names)
    assert any(n.startswith("Only the demo's simulated provider reads the world") for n in names)
