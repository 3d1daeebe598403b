"""Replies that mean something: each reply's category stored and listed per run and per draft batch, relabelled by the
caller (and learning reads the relabel), announced to the run's or batch's events; providers' unsubscribes,
complaints and bounces filed under the same categories; a tenant's suppression list, which drafts honour."""

import asyncio
import base64
import csv
import io
import json
from datetime import UTC, date, datetime, timedelta

import pytest

from app.agent.schemas import Email
from app.loop.features import content_hash
from app.outcomes import repository
from app.outcomes.meaning import InterestScale
from tests.support import learned, two_tenants

BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo"], "max_turns": 3,
        "feedback_source": "none"}
AT = datetime(2026, 11, 20, 9, 30, tzinfo=UTC).isoformat()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice with a finished one-iteration run, and Bob, on one service, on each database."""
    async with two_tenants(request.param, tmp_path_factory.mktemp("replies"), secret_key="test-secret-key-for-replies",
                           message_id_domain="mail.example.test") as (_, alice, bob):
        yield alice, bob, await learned(alice, BODY)


def event(ref, kind, event_id, recipient, **extra) -> dict:
    return {"ref": ref, "type": kind, "occurred_at": AT, "id": event_id, "recipient": recipient} | extra


async def ref_of(client, run_id: str, iteration: int = 1) -> str:
    return (await client.get(f"/runs/{run_id}/iterations/{iteration}")).json()["email"]["ref"]


async def all_replies(client, path: str) -> list[dict]:
    answer = await client.get(path, params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


async def test_reported_replies_are_filed_by_category_and_tallied(world):
    alice, _, run_id = world
    ref = await ref_of(alice, run_id)
    events = [event(ref, "delivered", f"tally-d{i}", f"t{i}@example.org") for i in range(4)] + [
        event(ref, "replied", "tally-r0", "t0@example.org", category="meeting"),
        event(ref, "replied", "tally-r1", "t1@example.org", sentiment="negative"),
        event(ref, "replied", "tally-r2", "t2@example.org"),
        event(ref, "replied", "tally-r3", "t3@example.org", category="out_of_office", returns_on="2099-01-05"),
    ]
    assert (await alice.post("/outcomes", json={"events": events})).json()["accepted"] == 8
    replies = [r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["ref"] == ref]
    assert [(r["category"], r["decided_by"], r["confidence"]) for r in replies] == [
        ("meeting", "caller", 1.0), ("not_interested", "caller", 1.0), ("unknown", "rules", 0.0),
        ("out_of_office", "caller", 1.0)]
    assert all(r["iteration"] == 1 and r["prospect_id"] is None and r["text"] is None for r in replies)
    assert replies[3]["returns_on"] == "2099-01-05" and replies[0]["returns_on"] is None
    assert all(r["id"].startswith("rpl_") for r in replies) and len({r["id"] for r in replies}) == 4
    tally = next(e for e in (await alice.get(f"/runs/{run_id}/outcomes")).json()["data"] if e["ref"] == ref)
    assert tally["replies_by_category"] == {"meeting": 1, "not_interested": 1, "unknown": 1, "out_of_office": 1}
    assert tally["positive_replies"] == 1  # the meeting; an out-of-office and an unknown count for nothing

    # an out-of-office with a return date holds its recipient until then
    held = await alice.get("/suppressions/T3@Example.org")
    assert held.status_code == 200 and held.json()["until"] == "2099-01-05" and held.json()["reason"] == "out_of_office"
    # pages, oldest first, `after` the last id
    first = (await alice.get(f"/runs/{run_id}/replies", params={"limit": 1})).json()
    assert first["has_more"] is True and len(first["data"]) == 1
    rest = (await alice.get(f"/runs/{run_id}/replies", params={"after": first["data"][0]["id"]})).json()["data"]
    assert [r["id"] for r in rest][:3] == [r["id"] for r in replies[1:]][:3]
    assert (await alice.get(f"/runs/{run_id}/replies", params={"after": "eml_x"})).status_code == 422
    assert (await alice.get(f"/runs/{run_id}/replies", params={"limit": 1001})).status_code == 422


async def test_a_category_on_an_event_that_is_no_reply_is_a_422(world):
    alice, _, run_id = world
    ref = await ref_of(alice, run_id)
    answer = await alice.post("/outcomes", json={"events": [event(ref, "opened", "bad-1", "x@example.org",
                                                                  category="meeting")]})
    assert answer.status_code == 422 and "category" in answer.text
    answer = await alice.post("/outcomes", json={"events": [event(ref, "replied", "bad-2", "x@example.org",
                                                                  category="thrilled")]})
    assert answer.status_code == 422 and "meeting" in answer.text


async def test_a_relabel_is_the_callers_and_another_tenants_reply_is_not_found(world):
    alice, bob, run_id = world
    ref = await ref_of(alice, run_id)
    assert (await alice.post("/outcomes", json={"events": [
        event(ref, "replied", "relabel-1", "rosa@example.org", category="interested")]})).json()["accepted"] == 1
    reply = next(r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["ref"] == ref
                 and r["category"] == "interested")
    unknown = await alice.patch(f"/replies/{reply['id']}", json={"category": "thrilled"})
    assert unknown.status_code == 422
    for category in ("meeting", "not_interested", "unsubscribe", "out_of_office"):
        assert category in unknown.text  # the message lists the allowed categories
    assert (await bob.patch(f"/replies/{reply['id']}", json={"category": "unsubscribe"})).status_code == 404
    assert (await alice.patch("/replies/rpl_999999999", json={"category": "unsubscribe"})).status_code == 404
    assert (await alice.patch("/replies/nonsense", json={"category": "unsubscribe"})).status_code == 404
    assert (await bob.get("/suppressions/rosa@example.org")).status_code == 404

    relabelled = await alice.patch(f"/replies/{reply['id']}", json={"category": "unsubscribe"})
    assert relabelled.status_code == 200, relabelled.text
    assert (relabelled.json()["category"], relabelled.json()["decided_by"]) == ("unsubscribe", "caller")
    listed = next(r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["id"] == reply["id"])
    assert listed["category"] == "unsubscribe"
    assert (await alice.get("/suppressions/rosa@example.org")).json()["reason"] == "unsubscribe"
    assert (await bob.get("/suppressions/rosa@example.org")).status_code == 404  # Alice's list, not Bob's


async def test_each_reply_is_announced_to_its_run(world):
    alice, _, run_id = world
    ref = await ref_of(alice, run_id)
    assert (await alice.post("/outcomes", json={"events": [
        event(ref, "replied", "announce-1", "ana@example.org", category="question")]})).json()["accepted"] == 1
    events = (await alice.get(f"/runs/{run_id}/events", params={"limit": 100})).json()["data"]
    announced = [e for e in events if e["type"] == "reply.received" and e["data"]["category"] == "question"]
    assert len(announced) == 1
    data = announced[0]["data"]
    assert (data["run_id"], data["ref"], data["iteration"], data["confidence"]) == (run_id, ref, 1, 1.0)
    assert data["seq"] == announced[0]["seq"] == max(e["seq"] for e in events)


async def test_providers_unsubscribes_complaints_and_bounces_are_filed_and_suppress(world):
    alice, _, run_id = world
    ref = await ref_of(alice, run_id)
    source = (await alice.post("/outcome-sources", json={"provider": "postmark"})).json()
    auth = base64.b64encode(f"{source['basic_auth']['username']}:{source['basic_auth']['password']}".encode()).decode()
    records = [
        {"RecordType": "SpamComplaint", "MessageID": "m-1", "Email": "spam@example.org", "BouncedAt": AT, "ID": 1},
        {"RecordType": "Bounce", "Type": "HardBounce", "MessageID": "m-2", "Email": "gone@example.org",
         "BouncedAt": AT, "ID": 2},
        {"RecordType": "SubscriptionChange", "MessageID": "m-3", "Recipient": "bye@example.org", "ChangedAt": AT,
         "SuppressSending": True},
    ]
    for record in records:
        answer = await alice.post(source["url"], content=json.dumps(record | {"Metadata": {"codreamer_ref": ref}}),
                                  headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"})
        assert answer.json()["accepted"] == 1, answer.text
    reasons = {email: (await alice.get(f"/suppressions/{email}")).json()
               for email in ("spam@example.org", "gone@example.org", "bye@example.org")}
    assert {email: (s["reason"], s["until"]) for email, s in reasons.items()} == {
        "spam@example.org": ("complaint", None), "gone@example.org": ("bounce", None),
        "bye@example.org": ("unsubscribe", None)}
    # none of them is a reply
    assert not [r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["category"] == "bounce"]


async def test_the_suppression_list_is_added_to_read_and_lifted(world):
    alice, bob, _ = world
    added = await alice.post("/suppressions", json={"emails": ["Legal@Example.org", "legal@example.org "],
                                                    "reason": "legal hold"})
    assert added.status_code == 201 and added.json() == {"suppressed": 1}
    found = (await alice.get("/suppressions/legal@example.org")).json()
    assert found["reason"] == "legal hold" and found["until"] is None
    assert datetime.fromisoformat(found["since"]) > datetime.now(UTC) - timedelta(hours=1)
    assert (await bob.get("/suppressions/legal@example.org")).status_code == 404
    assert (await bob.delete("/suppressions/legal@example.org")).status_code == 404
    assert (await alice.delete("/suppressions/legal@example.org")).status_code == 204
    assert (await alice.get("/suppressions/legal@example.org")).status_code == 404
    assert (await alice.delete("/suppressions/legal@example.org")).status_code == 404
    for bad in ({"emails": []}, {"emails": ["not-an-address"]}, {"emails": ["a@b.c"], "reason": ""}):
        assert (await alice.post("/suppressions", json=bad)).status_code == 422


async def test_an_out_of_office_past_its_return_date_holds_no_more(world):
    alice, _, run_id = world
    ref = await ref_of(alice, run_id)
    past = (date.today() - timedelta(days=2)).isoformat()
    assert (await alice.post("/outcomes", json={"events": [
        event(ref, "replied", "ooo-past", "back@example.org", category="out_of_office", returns_on=past)]})).status_code == 202
    assert (await alice.get("/suppressions/back@example.org")).status_code == 404


async def test_a_suppressed_prospect_is_drafted_without_an_email_and_replies_to_drafts_reach_the_batch(world):
    alice, bob, run_id = world
    await alice.post("/suppressions", json={"emails": ["blocked@example.org"], "reason": "unsubscribe"})
    prospects = [
        {"id": "ok-1", "name": "Tomasz Nowak", "email": "tomasz@example.org", "company": "Ledgerly", "role": "CFO",
         "industry": "saas", "pains": ["cloud invoices keep surprising us at month-end"]},
        {"id": "no-1", "name": "Ines Duarte", "email": "Blocked@example.org", "company": "Clinica Norte",
         "role": "CFO", "industry": "saas", "pains": ["warehouse spend growing faster than revenue"]},
    ]
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1",
                                                 "prospects": prospects})).json()
    batch_id = created["batch_id"]
    for _ in range(3000):
        batch = (await alice.get(f"/draft-batches/{batch_id}")).json()
        if batch["status"] in ("succeeded", "failed"):
            break
        await asyncio.sleep(0.1)
    assert batch["status"] == "succeeded" and batch["completed"] == 2, batch
    drafts = (await alice.get(f"/draft-batches/{batch_id}/drafts")).json()["data"]
    assert drafts[0]["email"] is not None and drafts[0]["suppressed"] is None
    assert drafts[1]["email"] is None and drafts[1]["suppressed"] == {"reason": "unsubscribe", "until": None}
    rows = list(csv.DictReader(io.StringIO((await alice.get(f"/draft-batches/{batch_id}/drafts",
                                                            headers={"Accept": "text/csv"})).text)))
    assert [(r["subject"] == "", r["body"] == "", r["suppressed"]) for r in rows] == [
        (False, False, ""), (True, True, "unsubscribe")]

    ref = drafts[0]["email"]["ref"]
    assert (await alice.post("/outcomes", json={"events": [
        event(ref, "delivered", "draft-d", "tomasz@example.org"),
        event(ref, "replied", "draft-r", "tomasz@example.org", category="interested")]})).json()["accepted"] == 2
    replies = await all_replies(alice, f"/draft-batches/{batch_id}/replies")
    assert [(r["prospect_id"], r["iteration"], r["category"]) for r in replies] == [("ok-1", None, "interested")]
    assert (await bob.get(f"/draft-batches/{batch_id}/replies")).status_code == 404
    assert not [r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["ref"] == ref]  # the batch's
    outcomes = (await alice.get(f"/draft-batches/{batch_id}/outcomes")).json()["data"]
    mine = next(o for o in outcomes if o["prospect_id"] == "ok-1")
    assert (mine["category"], mine["replies_by_category"], mine["positive_replies"]) == ("interested", {"interested": 1}, 1)
    events = (await alice.get(f"/draft-batches/{batch_id}/events")).json()["data"]
    announced = [e["data"] for e in events if e["type"] == "reply.received"]
    assert announced == [{"batch_id": batch_id, "seq": 2, "ref": ref, "category": "interested", "confidence": 1.0,
                          "prospect_id": "ok-1"}]


async def test_learning_reads_a_relabel(world):
    """The outcome model's counts of an email's replies follow a relabel: an interested reply relabelled unsubscribe
    weighs against the email from then on."""
    alice, _, run_id = world
    ref = await ref_of(alice, run_id, iteration=0)
    services = alice._transport.app.state.services  # noqa: SLF001 - the test's own service
    scale = InterestScale.of(services.settings.reply_interest)
    text = await email_hash(alice, run_id)

    async def counts() -> tuple[float, float]:  # an email with the same text shares its counts
        async with services.db.read() as session:
            sent = await repository.sent_emails(session, "alice", mature_before=datetime.now(UTC), scale=scale,
                                                run_id=run_id)
        mine = [s for s in sent if s.content_hash == text]
        return sum(s.positive for s in mine), sum(s.negative for s in mine)

    before = await counts()
    assert (await alice.post("/outcomes", json={"events": [  # a reply counts from a recipient delivered to
        event(ref, "delivered", "learn-0", "lena@example.org"),
        event(ref, "replied", "learn-1", "lena@example.org", category="interested")]})).json()["accepted"] == 2
    assert await counts() == (before[0] + 0.5, before[1])  # an interested reply: half a meeting
    reply = next(r for r in await all_replies(alice, f"/runs/{run_id}/replies") if r["ref"] == ref)
    assert (await alice.patch(f"/replies/{reply['id']}", json={"category": "unsubscribe"})).status_code == 200
    assert await counts() == (before[0], before[1] + 1.0)


async def email_hash(client, run_id: str) -> str:
    email = (await client.get(f"/runs/{run_id}/iterations/0")).json()["email"]
    return content_hash(Email(subject=email["subject"], body=email["body"], citations=email["citations"]))
