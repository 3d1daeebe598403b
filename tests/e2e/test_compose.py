"""docker-compose.yml through the commands that read it here: check-jsonschema's CLI, and git for
what stays out of the repository (tests/unit/test_compose.py checks the rest in process)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def test_check_jsonschema_cli_accepts_the_compose_file():
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_env_is_git_ignored_and_env_example_is_not():
    if not shutil.which("git") or subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git work tree")
    ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", ".env", ".env.example"],
                             capture_output=True, text=True).stdout.split()
    assert ignored == [".env"]
