"""Alembic's migrations and the SQLAlchemy models describe the same schema, on both databases; DBOS
connects with the URL the service gives it."""

import json
import sqlite3
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from dbos import DBOS
from sqlalchemy import create_engine, text

import app.models  # noqa: F401
from alembic import command
from app.kit import migrations
from app.kit.db import Base, driver_url
from app.kit.settings import Settings
from app.lifecycle import api as lifecycle
from tests.support import FreshPostgresDatabase, require_postgres


def schema_drift(url: str) -> list:
    migrations.upgrade(url)
    engine = create_engine(driver_url(url, sync=True))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert context.get_current_revision() == migrations.head_revision()
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def test_sqlite_migrations_match_models(tmp_path):
    assert schema_drift(f"sqlite:///{tmp_path}/db.sqlite") == []


def test_postgresql_migrations_match_models():
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        assert schema_drift(database.url) == []
    finally:
        database.drop()


def test_dbos_uses_a_sibling_sqlite_file(tmp_path):
    url = lifecycle.dbos_database_url(Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/codreamer.sqlite"))
    DBOS.migrate(url)  # DBOS's own engine on that URL, as DBOS.launch() makes it
    with sqlite3.connect(tmp_path / "codreamer-dbos.sqlite") as connection:
        assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'workflow_status'").fetchone()
    assert not (tmp_path / "codreamer.sqlite").exists()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_dbos_uses_the_dbos_schema_of_the_postgresql_database(scheme):
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        url = scheme + database.url.removeprefix("postgresql")
        DBOS.migrate(lifecycle.dbos_database_url(Settings(_env_file=None, database_url=url)))
        with psycopg.connect(database.url) as connection:
            assert connection.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0] is not None
    finally:
        database.drop()


def _events_by_subject_carried_over(url: str) -> None:
    """A database of the release before events by subject: its run events stay the run's, in order, a promotion moves
    to the graph it was promoted on (the deployment still names it), and a pending delivery keeps its receiver's
    secret, now on the delivery."""
    command.upgrade(migrations.alembic_config(url), "0013")
    engine = create_engine(driver_url(url, sync=True))
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO graphs (id, tenant, name, created_at) VALUES ('g', NULL, 'G', :at)"),
                               {"at": at})
            connection.execute(text(
                "INSERT INTO runs (id, tenant, status, graph_id, config, iterations_total, iterations_completed, "
                "last_seq, attempt, webhook_url, webhook_secret, created_at) VALUES ('run_a', 'acme', 'succeeded', 'g', "
                "'{}', 1, 1, 3, 1, 'sealed-url', 'sealed-secret', :at)"), {"at": at})
            for seq, (event_id, type_, data) in enumerate([
                ("evt_1", "run.started", {"run_id": "run_a", "seq": 1, "status": "running", "attempt": 1}),
                ("evt_2", "run.succeeded", {"run_id": "run_a", "seq": 2, "iterations_completed": 1}),
                ("evt_3", "policy.promoted", {"run_id": "run_a", "seq": 3, "graph_id": "g", "policy": "run_a@1"}),
            ], start=1):
                connection.execute(text("INSERT INTO events (id, run_id, seq, type, data, created_at) VALUES "
                                        "(:id, 'run_a', :seq, :type, :data, :at)"),
                                   {"id": event_id, "seq": seq, "type": type_, "data": json.dumps(data),
                                    "at": at + timedelta(seconds=seq)})
            connection.execute(text(
                "INSERT INTO webhook_deliveries (event_id, run_id, type, url, status, attempts, next_attempt_at, "
                "created_at) VALUES ('evt_3', 'run_a', 'policy.promoted', 'sealed-url', 'pending', 0, :at, :at)"),
                {"at": at})
            connection.execute(text(
                "INSERT INTO deployments (graph_id, tenant, run_id, iteration, challengers, traffic, floor, min_sends, "
                "auto_promote, require_evidence, forced, deployed_at, \"trigger\", rollback, event_id, sequential) "
                "VALUES ('g', 'acme', 'run_a', 1, '[]', 'fixed', 0.0, 100, false, false, false, :at, 'request', false, "
                "'evt_3', false)"), {"at": at})
        migrations.upgrade(url)
        with engine.connect() as connection:
            events = connection.execute(text(
                "SELECT id, tenant, subject_kind, subject_id, seq, data FROM events ORDER BY id")).all()
            delivery = connection.execute(text(
                "SELECT tenant, subject_kind, subject_id, url, secret FROM webhook_deliveries")).one()
            deployed_event = connection.execute(text("SELECT event_id FROM deployments")).scalar_one()
    finally:
        engine.dispose()
    loaded = [(i, t, k, s, n, d if isinstance(d, dict) else json.loads(d)) for i, t, k, s, n, d in events]
    assert [row[:5] for row in loaded] == [("evt_1", "acme", "run", "run_a", 1), ("evt_2", "acme", "run", "run_a", 2),
                                           ("evt_3", "acme", "graph", "g", 1)]
    assert loaded[2][5] == {"graph_id": "g", "seq": 1, "policy": "run_a@1"}
    assert loaded[0][5] == {"run_id": "run_a", "seq": 1, "status": "running", "attempt": 1}
    assert tuple(delivery) == ("acme", "graph", "g", "sealed-url", "sealed-secret")
    assert deployed_event == "evt_3"


def test_sqlite_carries_run_events_over_to_subjects(tmp_path):
    _events_by_subject_carried_over(f"sqlite:///{tmp_path}/db.sqlite")


def test_postgresql_carries_run_events_over_to_subjects():
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        _events_by_subject_carried_over(database.url)
    finally:
        database.drop()


def _outcomes_get_their_categories(url: str) -> None:
    """A database of the release before reply categories: each stored reply gets the category its sentiment said (an
    unknown one confidence 0), a provider's unsubscribe, complaint and bounce theirs, and their recipients are
    suppressed from their first such event."""
    command.upgrade(migrations.alembic_config(url), "0015")
    engine = create_engine(driver_url(url, sync=True))
    at = datetime(2026, 11, 1, tzinfo=timezone.utc)
    rows = [("e1", None, "replied", "positive", "r1"), ("e2", None, "replied", "negative", "r2"),
            ("e3", None, "replied", None, "r3"), ("e4", "src_1", "auto_replied", None, "r4"),
            ("e5", "src_1", "unsubscribed", None, "r5"), ("e6", None, "complained", None, "r6"),
            ("e7", "src_1", "bounced", None, "r7"), ("e8", "src_1", "unsubscribed", None, "r7"),
            ("e9", None, "delivered", None, "r1")]
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO graphs (id, tenant, name, created_at) VALUES ('g', NULL, 'G', :at)"),
                               {"at": at})
            connection.execute(text(
                "INSERT INTO runs (id, tenant, status, graph_id, config, iterations_total, iterations_completed, "
                "last_seq, attempt, created_at) VALUES ('run_a', 'acme', 'succeeded', 'g', '{}', 1, 1, 0, 1, :at)"),
                {"at": at})
            for n, (event_id, source, kind, sentiment, recipient) in enumerate(rows):
                connection.execute(text(
                    "INSERT INTO outcome_events (tenant, event_id, source_id, run_id, iteration, ref, type, occurred_at, "
                    "recipient, machine, sentiment, received_at) VALUES ('acme', :id, :source, 'run_a', 1, 'eml_a', "
                    ":type, :at, :recipient, false, :sentiment, :at)"),
                    {"id": event_id, "source": source, "type": kind, "sentiment": sentiment, "recipient": recipient,
                     "at": at + timedelta(minutes=n)})
        migrations.upgrade(url)
        with engine.connect() as connection:
            meant = {row[0]: tuple(row[1:]) for row in connection.execute(text(
                "SELECT event_id, category, confidence, decided_by FROM outcome_events"))}
            held = {row[0]: tuple(row[1:]) for row in connection.execute(text(
                "SELECT recipient, tenant, reason, until FROM suppressions"))}
    finally:
        engine.dispose()
    assert meant == {"e1": ("interested", 1.0, "caller"), "e2": ("not_interested", 1.0, "caller"),
                     "e3": ("unknown", 0.0, "rules"), "e4": ("auto_reply", 1.0, "rules"),
                     "e5": ("unsubscribe", 1.0, "provider"), "e6": ("unsubscribe", 1.0, "caller"),
                     "e7": ("bounce", 1.0, "provider"), "e8": ("unsubscribe", 1.0, "provider"),
                     "e9": (None, None, None)}
    assert held == {"r5": ("acme", "unsubscribe", None), "r6": ("acme", "complaint", None),
                    "r7": ("acme", "bounce", None)}


def test_sqlite_outcomes_get_their_categories(tmp_path):
    _outcomes_get_their_categories(f"sqlite:///{tmp_path}/db.sqlite")


def test_postgresql_outcomes_get_their_categories():
    require_postgres()
    database = FreshPostgresDatabase()
    try:
        _outcomes_get_their_categories(database.url)
    finally:
        database.drop()
