"""The relay needs only a receiver's status: a large answer body is never read (issue 18).

`import art` patches httpx so each body read copies everything read so far: reading a 50 MB
answer kept a worker on the CPU past its deadline and grew it by gigabytes. Real HTTP on
loopback, a real database, the real relay; the receiver counts the bytes it got to send.
"""

import asyncio

import art  # noqa: F401  (its httpx patch is what a worker runs with)
import pytest
from sqlalchemy import select

from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.events.relay import WebhookRelay
from app.events.signing import SecretBox, new_secret
from app.kit import migrations
from app.kit.db import Database, utcnow
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs_repository
from app.knowledge_graph.service import demo_document
from app.runs.models import Run
from tests.standins import HugeAnswerReceiver


async def one_due_webhook(settings: Settings, url: str) -> None:
    """A run with one event whose webhook to `url` is due now."""
    await asyncio.to_thread(migrations.upgrade, settings.database_url)
    db, now = Database(settings), utcnow()
    try:
        async with db.transaction() as session:
            await graphs_repository.save(session, demo_document())
            secret = new_secret()
            session.add(Run(id="run_huge", status="running", graph_id=demo_document().id, config={}, iterations_total=1,
                            webhook_url=url, webhook_secret=secret, last_seq=1))
            await session.flush()
            session.add(Event(id="evt_huge", tenant="public", subject_kind="run", subject_id="run_huge", seq=1,
                              type="run.started", created_at=now,
                              data={"run_id": "run_huge", "seq": 1, "status": "running", "attempt": 1}))
            await session.flush()
            session.add(WebhookDelivery(event_id="evt_huge", tenant="public", subject_kind="run", subject_id="run_huge",
                                        type="run.started", url=url, secret=secret, status="pending", attempts=0,
                                        next_attempt_at=now, created_at=now))
    finally:
        await db.close()


@pytest.mark.parametrize("status, delivered", [(200, True), (500, False)])
async def test_a_huge_answer_is_not_read_and_its_status_is_recorded(tmp_path, status, delivered):
    receiver = HugeAnswerReceiver(status)
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        webhook_allow_private=True, webhook_timeout_s=10.0, webhook_retry_schedule=[3600])
    await one_due_webhook(settings, receiver.url)
    db = Database(settings)
    relay = WebhookRelay(db, settings, SecretBox("relay-tests-secret-key"))
    try:
        assert await relay.fill_slots() == 1
        for _ in range(600):  # the attempt ends, and is recorded
            async with db.read() as session:
                attempt = await session.scalar(select(WebhookAttempt))
            if attempt is not None:
                break
            await asyncio.sleep(0.05)
        assert await asyncio.to_thread(receiver.done.wait, 30)  # the receiver saw the relay hang up
        async with db.read() as session:
            delivery = await session.get(WebhookDelivery, "evt_huge")
    finally:
        await relay.close()
        await db.close()
        receiver.close()

    assert attempt is not None and attempt.status_code == status, attempt and (attempt.status_code, attempt.error)
    assert attempt.error == (None if delivered else f"receiver answered {status}")
    assert delivery.status == ("delivered" if delivered else "pending") and delivery.attempts == 1
    # Unread, the body stops at what the sockets' buffers hold: a few MB at most, never the 50 MB.
    [sent] = receiver.sent
    assert sent < 8 * 1024 * 1024, f"the relay read {sent} bytes of the answer"
