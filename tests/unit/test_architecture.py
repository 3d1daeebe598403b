"""Imports point one way: the layers in pyproject.toml's import-linter contracts, checked on every run
(tests/e2e/test_architecture.py shows the check failing on an upward import)."""

from pathlib import Path

from importlinter.cli import EXIT_STATUS_SUCCESS, lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_imports_only_the_layers_below_it():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == EXIT_STATUS_SUCCESS


