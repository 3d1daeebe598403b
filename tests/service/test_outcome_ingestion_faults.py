"""Ingestion that never loses an event and never answers 500 to what a sender controls: the nonce and the events in
one transaction, nonces keyed by signing key, every provider field validated into a 4xx, a run deleted under a batch."""

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime

import asyncpg
import pytest
from standardwebhooks.webhooks import Webhook

from tests.service.test_outcomes import BODY, event, outcomes_of, published_ref, world  # noqa: F401 - the fixture
from tests.support import finished

OUT_OF_RANGE = "9999-12-31T23:59:59-14:00"  # valid ISO 8601, past year 9999 once in UTC


def database_url(client) -> str:
    return client._transport.app.state.services.settings.database_url  # noqa: SLF001 - the test's own database


def is_postgres(client) -> bool:
    return database_url(client).startswith("postgresql")


def mailgun_signer(key: str):
    def request(ref: str, event_id: str, token: str | None = None) -> dict:
        token = token or secrets.token_hex(25)
        timestamp = str(int(time.time()))
        signature = hmac.new(key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()
        return {"signature": {"timestamp": timestamp, "token": token, "signature": signature},
                "event-data": {"id": event_id, "event": "delivered", "timestamp": time.time(),
                               "recipient": "kim@example.org", "user-variables": {"codreamer_ref": ref}}}
    return request


async def test_a_mailgun_request_whose_storing_failed_is_accepted_when_mailgun_retries_it(world):
    alice, _, run_id = world
    if not is_postgres(alice):
        pytest.skip("the transient failure is a PostgreSQL serialization failure raised by a trigger")
    ref = await published_ref(alice, run_id, 0)
    key = secrets.token_hex(16)
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": key})).json()
    request = mailgun_signer(key)(ref, "mg-retry-1")
    connection = await asyncpg.connect(database_url(alice))
    try:
        await connection.execute("""
            CREATE FUNCTION refuse_once() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_once BEFORE INSERT ON outcome_events FOR EACH ROW EXECUTE FUNCTION refuse_once();""")
        failed = await alice.post(source["url"], json=request)
        assert failed.status_code == 503, failed.text  # a transient database error: retry
    finally:
        await connection.execute("DROP TRIGGER IF EXISTS refuse_once ON outcome_events; DROP FUNCTION IF EXISTS refuse_once")
        await connection.close()
    retried = await alice.post(source["url"], json=request)  # Mailgun's retry: the same body, the same token
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"accepted": 1, "duplicates": 0, "unattributed": 0}
    assert (await alice.post(source["url"], json=request)).status_code == 401  # stored now: a replay is refused


async def test_a_signed_block_replayed_to_another_source_with_the_same_key_is_refused(world):
    alice, bob, run_id = world
    ref = await published_ref(alice, run_id, 0)
    key = secrets.token_hex(16)
    first = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": key})).json()
    second = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": key})).json()
    other_key = (await bob.post("/outcome-sources", json={"provider": "mailgun", "signing_key": secrets.token_hex(16)})).json()
    sign = mailgun_signer(key)
    request = sign(ref, "mg-cross-1")
    assert (await alice.post(first["url"], json=request)).json()["accepted"] == 1
    replayed = request | {"event-data": request["event-data"] | {"id": "mg-cross-2", "event": "complained"}}
    answer = await alice.post(second["url"], json=replayed)
    assert answer.status_code == 401 and "used before" in answer.text
    # the same token under another key is another nonce (and here a bad signature: never stored either way)
    assert (await bob.post(other_key["url"], json=replayed)).status_code == 401
    assert (await outcomes_of(alice, run_id, ref)).get("delivered", 0) >= 1


async def test_a_mailgun_token_over_200_characters_is_refused_not_a_500(world):
    alice, _, run_id = world
    key = secrets.token_hex(16)
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": key})).json()
    answer = await alice.post(source["url"], json=mailgun_signer(key)(await published_ref(alice, run_id), "mg-long", "t" * 300))
    assert answer.status_code == 401 and "200 characters" in answer.text


@pytest.mark.parametrize("occurred_at", [OUT_OF_RANGE, "0001-01-01T00:00:00+14:00", "1900-01-01T00:00:00Z"])
async def test_an_outcome_time_out_of_range_once_in_utc_is_a_422(world, occurred_at):
    alice, _, run_id = world
    ref = await published_ref(alice, run_id)
    answer = await alice.post("/outcomes", json={"events": [event(ref, "opened", "far-1") | {"occurred_at": occurred_at}]})
    assert answer.status_code == 422 and "occurred_at" in answer.text


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
async def test_a_nul_in_any_text_field_is_a_422(world, content_type):
    alice, _, run_id = world
    ref = await published_ref(alice, run_id)
    for field in ("id", "recipient", "ref"):
        body = {"events": [event(ref, "opened", "nul-1") | {field: "a\u0000b"}]}
        answer = await alice.post("/outcomes", content=json.dumps(body), headers={"Content-Type": content_type})
        assert answer.status_code == 422, (field, answer.status_code, answer.text)
    source, headers = await postmark(alice)
    for field in ("MessageID", "Recipient"):
        record = {"RecordType": "Delivery", "MessageID": "pm-nul", "Recipient": "lee@example.org",
                  "DeliveredAt": "2026-11-20T09:30:00Z", "Metadata": {"codreamer_ref": ref}} | {field: "pm\u0000x"}
        answer = await alice.post(source["url"], content=json.dumps(record), headers=headers | {"Content-Type": content_type})
        assert answer.status_code == 422, (field, answer.status_code, answer.text)


async def postmark(alice) -> tuple[dict, dict]:
    source = (await alice.post("/outcome-sources", json={"provider": "postmark"})).json()
    auth = source["basic_auth"]
    credentials = base64.b64encode(f"{auth['username']}:{auth['password']}".encode()).decode()
    return source, {"Authorization": f"Basic {credentials}", "Content-Type": "application/json"}


async def test_provider_times_out_of_range_are_a_422_on_postmark_and_resend(world):
    alice, _, run_id = world
    ref = await published_ref(alice, run_id)
    source, headers = await postmark(alice)
    record = {"RecordType": "Delivery", "MessageID": "pm-1", "Recipient": "lee@example.org", "DeliveredAt": OUT_OF_RANGE,
              "Metadata": {"codreamer_ref": ref}}
    answer = await alice.post(source["url"], content=json.dumps(record), headers=headers)
    assert answer.status_code == 422 and "range" in answer.text

    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    resend = (await alice.post("/outcome-sources", json={"provider": "resend", "secret": secret})).json()
    body = json.dumps({"type": "email.delivered", "created_at": OUT_OF_RANGE,
                       "data": {"to": ["lee@example.org"], "tags": {"codreamer_ref": ref}}})
    now = datetime.now(UTC)
    signed = {"svix-id": "msg_far", "svix-timestamp": str(int(now.timestamp())),
              "svix-signature": Webhook(secret).sign("msg_far", now, body), "Content-Type": "application/json"}
    answer = await alice.post(resend["url"], content=body, headers=signed)
    assert answer.status_code == 422 and "range" in answer.text


async def test_json_nested_a_thousand_deep_is_a_4xx_on_every_hook(world):
    alice, _, _ = world
    deep = b"[" * 1000 + b"]" * 1000
    mailgun = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": secrets.token_hex(16)})).json()
    answer = await alice.post(mailgun["url"], content=deep, headers={"Content-Type": "application/json"})
    assert answer.status_code == 401  # no signature block can be read: unauthenticated
    source, headers = await postmark(alice)
    answer = await alice.post(source["url"], content=b'{"RecordType": ' + deep + b"}", headers=headers)
    assert answer.status_code == 422 and "nested" in answer.text
    answer = await alice.post("/outcomes", content=b'{"events": ' + deep + b"}", headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["detail"]  # as any body that is not JSON text


async def test_a_batch_stored_while_its_run_is_deleted_counts_its_events_unattributed(world):
    alice, _, _ = world
    if not is_postgres(alice):
        pytest.skip("SQLite's writers take turns: a deletion cannot land between a batch's read and its insert")
    run_id = (await alice.post("/learn-loop", json=BODY)).json()["run_id"]
    assert (await finished(alice, run_id, timeout=300))["status"] == "succeeded"
    ref = await published_ref(alice, run_id)
    batch = {"events": [event(ref, "delivered", f"gone-{n}", f"g{n}@example.org") for n in range(50)]}
    deleter = await asyncpg.connect(database_url(alice))
    try:
        deletion = deleter.transaction()
        await deletion.start()
        # as DELETE /runs does (the run's own refs, then the run), uncommitted: the batch still sees the refs
        await deleter.execute("DELETE FROM email_refs WHERE run_id = $1 AND draft_batch_id IS NULL", run_id)
        await deleter.execute("DELETE FROM runs WHERE id = $1", run_id)
        answer = asyncio.ensure_future(alice.post("/outcomes", json=batch))
        deleting = await deleter.fetchval("SELECT pg_backend_pid()")
        for _ in range(600):  # until the batch waits on the deleted refs' row locks
            waiting = await deleter.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", deleting)
            if waiting or answer.done():
                break
            await asyncio.sleep(0.05)
        await deletion.commit()
        answer = await answer
    finally:
        await deleter.close()
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"accepted": 0, "duplicates": 0, "unattributed": 50}
