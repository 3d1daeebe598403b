"""runs changed notice: on PostgreSQL, a trigger NOTIFYs `runs_changed` with a run's id when a column of its version
changes, so an API process can keep run versions until they change instead of asking for each read

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 03:00:00

"""
from typing import Sequence, Union

from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# What a run's version reads (app.runs.repository): a change of any of these, or of the row's existence.
# `waiting` is json, which has no equality: it is compared as text.
VERSION_COLUMNS = ("tenant", "attempt", "last_seq", "status", "waiting::text")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite has no notices; the embedded API reads a version in microseconds instead
    op.execute("""
        CREATE FUNCTION runs_changed_notice() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('runs_changed', COALESCE(NEW.id, OLD.id));
            RETURN NULL;
        END $$""")
    op.execute("CREATE TRIGGER runs_changed_on_write AFTER INSERT OR DELETE ON runs "
               "FOR EACH ROW EXECUTE FUNCTION runs_changed_notice()")
    columns = ", ".join(c.removesuffix("::text") for c in VERSION_COLUMNS)
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in VERSION_COLUMNS)
    op.execute(f"CREATE TRIGGER runs_changed_on_update AFTER UPDATE OF {columns} ON runs FOR EACH ROW "
               f"WHEN ({changed}) EXECUTE FUNCTION runs_changed_notice()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER runs_changed_on_update ON runs")
    op.execute("DROP TRIGGER runs_changed_on_write ON runs")
    op.execute("DROP FUNCTION runs_changed_notice()")
