"""Imports point one way: the layers in pyproject.toml's import-linter contracts, checked on every run
(tests/e2e/test_architecture.py shows the check failing on each kind of breach)."""

import re
import tomllib
from pathlib import Path

from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

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
