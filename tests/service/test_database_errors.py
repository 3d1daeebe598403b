"""A failed statement's message, the one a log line would carry, names the statement, not the values it was given."""

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.kit.db import create_engine
from app.kit.settings import Settings
from tests.support import FreshPostgresDatabase, require_postgres


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_errors_never_carry_a_rows_values(tmp_path, kind):
    postgres = None
    if kind == "postgresql":
        require_postgres()
        postgres = FreshPostgresDatabase()
    url = postgres.url if postgres else f"sqlite:///{tmp_path}/db.sqlite"
    engine = create_engine(Settings(_env_file=None, database_url=url, environment="test"))
    try:
        with pytest.raises(DBAPIError) as failed:
            async with engine.connect() as connection:
                await connection.execute(text("SELECT * FROM nowhere WHERE x = :x"), {"x": "priya@example.org"})
        assert "nowhere" in str(failed.value) and "priya@example.org" not in str(failed.value)
    finally:
        await engine.dispose()
        if postgres:
            postgres.drop()
