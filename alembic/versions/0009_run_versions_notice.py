"""run versions notice: on PostgreSQL, a trigger NOTIFYs `run_versions` with a run's new version itself, so an API
process updates what it keeps in place instead of reading the run again after each change

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 05:00:00

The payload is JSON: {"key": id, "row": [id, tenant, attempt, last_seq, status, waiting as text], "moved": bool}, the
row as `app.runs.repository` reads it; "moved" when the change may move the run into or out of a list (it is new, or
its tenant or status changed); no "row" when it was deleted, or when the notice would be too long (the API then reads
the run again). 0008's `runs_changed` trigger stays for API processes of the release before this one, while a rolling
upgrade has both; a later migration drops it.
"""
from typing import Sequence, Union

from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

# What a run's version reads: a change of any of these, or of the row's existence. `waiting` is json, which has no
# equality: it is compared as text.
VERSION_COLUMNS = ("tenant", "attempt", "last_seq", "status", "waiting::text")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite has no notices; the embedded API reads a version in microseconds instead
    op.execute("""
        CREATE FUNCTION run_versions_notice() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            notice text;
        BEGIN
            IF TG_OP = 'DELETE' THEN
                notice := json_build_object('key', OLD.id)::text;
            ELSE
                notice := json_build_object(
                    'key', NEW.id,
                    'row', json_build_array(NEW.id, NEW.tenant, NEW.attempt, NEW.last_seq, NEW.status, NEW.waiting::text),
                    'moved', TG_OP = 'INSERT' OR OLD.tenant IS DISTINCT FROM NEW.tenant
                             OR OLD.status IS DISTINCT FROM NEW.status)::text;
                IF octet_length(notice) > 7900 THEN  -- a notice holds 8000 bytes: too long, it names the run only
                    notice := json_build_object('key', NEW.id)::text;
                END IF;
            END IF;
            PERFORM pg_notify('run_versions', notice);
            RETURN NULL;
        END $$""")
    op.execute("CREATE TRIGGER run_versions_on_write AFTER INSERT OR DELETE ON runs "
               "FOR EACH ROW EXECUTE FUNCTION run_versions_notice()")
    columns = ", ".join(c.removesuffix("::text") for c in VERSION_COLUMNS)
    changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in VERSION_COLUMNS)
    op.execute(f"CREATE TRIGGER run_versions_on_update AFTER UPDATE OF {columns} ON runs FOR EACH ROW "
               f"WHEN ({changed}) EXECUTE FUNCTION run_versions_notice()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER run_versions_on_update ON runs")
    op.execute("DROP TRIGGER run_versions_on_write ON runs")
    op.execute("DROP FUNCTION run_versions_notice()")
