"""The `alembic` command works from the repository root, on DATABASE_URL."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.kit import migrations

ROOT = Path(__file__).resolve().parents[2]


def test_the_alembic_command_migrates_from_the_repository_root(tmp_path):
    """`alembic upgrade head` and `alembic check` (autogenerate finds nothing) from a clone, on DATABASE_URL."""
    url = f"sqlite:///{tmp_path}/data/codreamer.sqlite"  # the folder does not exist yet
    env = {**os.environ, "DATABASE_URL": url}
    for args in (["upgrade", "head"], ["check"]):
        done = subprocess.run([sys.executable, "-m", "alembic", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "data" / "codreamer.sqlite") as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrations.head_revision(),)]
