"""Revision 0016 verifies the replies stored before it by the rule that needs no address: a reply counts when its
recipient had another event of the same email; the rest become unverified. Tested from a database made by revision
0015, on both databases, and back."""

from datetime import UTC, datetime

import sqlalchemy as sa

from alembic import command
from app.kit import migrations
from app.kit.db import driver_url

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
S, I, T, B = sa.String, sa.Integer, sa.DateTime(timezone=True), sa.Boolean


def test_replies_stored_before_are_verified_by_their_recipients_other_events(database_url):
    command.upgrade(migrations.alembic_config(database_url), "0015")
    engine = sa.create_engine(driver_url(database_url, sync=True))
    events = sa.table("outcome_events", *(sa.column(name, kind) for name, kind in dict(
        id=I, tenant=S, event_id=S, run_id=S, iteration=I, ref=S, type=S, occurred_at=T, recipient=S, machine=B,
        received_at=T).items()))
    rows = [  # (event id, ref, type, recipient)
        ("d-a", "eml_1", "delivered", "a"), ("r-a", "eml_1", "replied", "a"),  # delivered to a, a replied: verified
        ("r-x", "eml_1", "replied", "x"),  # x was never sent eml_1: unverified
        ("o-b", "eml_2", "opened", "b"), ("r-b", "eml_2", "replied", "b"), ("r-a2", "eml_2", "replied", "a"),
    ]
    try:
        with engine.begin() as connection:
            for n, (event_id, ref, kind, recipient) in enumerate(rows):
                connection.execute(events.insert().values(
                    id=n + 1, tenant="alice", event_id=event_id, run_id="run_1", iteration=0, ref=ref, type=kind,
                    occurred_at=NOW, recipient=recipient, machine=False, received_at=NOW))
        migrations.upgrade(database_url)
        with engine.begin() as connection:
            verified = dict(connection.execute(sa.text("SELECT event_id, verified FROM outcome_events")).all())
            assert {event_id for event_id, ok in verified.items() if not ok} == {"r-x", "r-a2"}
            assert connection.execute(sa.text("SELECT count(*) FROM email_refs WHERE recipient IS NOT NULL")).scalar_one() == 0
        command.downgrade(migrations.alembic_config(database_url), "0015")
        with engine.begin() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM outcome_events")).scalar_one() == len(rows)
    finally:
        engine.dispose()
