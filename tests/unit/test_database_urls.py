"""Database URLs get their drivers, and the package finds the migrations at the repository root."""

from pathlib import Path

import pytest

from app.kit import migrations
from app.kit.db import driver_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://u@h:5432/db", "postgresql+asyncpg://u@h:5432/db"),
    ("postgres://u@h/db", "postgresql+asyncpg://u@h/db"),
    ("sqlite:///./data/x.sqlite", "sqlite+aiosqlite:///./data/x.sqlite"),
])
def test_plain_urls_get_a_driver(url, expected):
    assert driver_url(url) == expected


def test_the_package_finds_the_root_migrations():
    """The wheel ships `app/_alembic`, a link to the root `alembic/`: a copy or a broken link would drift."""
    assert (ROOT / "app" / "_alembic").resolve() == ROOT / "alembic"
    assert migrations.script_location().resolve() == ROOT / "alembic"

