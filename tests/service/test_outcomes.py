"""Outcomes reported by the caller: refs on every email, attribution within the tenant, dedup, and the per-run view."""

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from standardwebhooks.webhooks import Webhook

from app.knowledge_graph.service import demo_document
from tests.support import learned, two_tenants

# judge-only: the outcomes these tests report are the only ones (the demo's simulated provider would send too)
BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 3,
        "feedback_source": "none"}
AT = datetime(2026, 11, 20, 9, 30, tzinfo=UTC).isoformat()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice with a finished run, and Bob, on one service, on each database (their inserts that skip a seen id differ)."""
    async with two_tenants(request.param, tmp_path_factory.mktemp("outcomes"), secret_key="test-secret-key-for-outcomes",
                           message_id_domain="mail.example.test") as (_, alice, bob):
        yield alice, bob, await learned(alice, BODY)


def event(ref, kind, event_id, recipient="priya@example.org", **extra) -> dict:
    return {"ref": ref, "type": kind, "occurred_at": AT, "id": event_id, "recipient": recipient} | extra


async def published_ref(alice, run_id: str, iteration: int = 1) -> str:
    return (await alice.get(f"/runs/{run_id}/iterations/{iteration}")).json()["email"]["ref"]


async def test_every_email_carries_a_unique_ref_and_a_message_id_that_names_it(world):
    alice, _, run_id = world
    refs = []
    for iteration in (0, 1):
        detail = (await alice.get(f"/runs/{run_id}/iterations/{iteration}")).json()
        emails = [detail["email"]] + [t["email"] for t in detail.get("trajectories", []) if t["email"]]
        for email in emails:
            assert email["ref"].startswith("eml_") and len(email["ref"]) == 24
            assert email["message_id"] == f"<{email['ref']}@mail.example.test>"
            refs.append(email["ref"])
    assert len(refs) == len(set(refs)) >= 3  # two baselines and trajectories, all different
    events = (await alice.get(f"/runs/{run_id}/events")).json()["data"]
    published = [e["data"]["email"]["ref"] for e in events if e["type"] == "iteration.completed"]
    assert published == [await published_ref(alice, run_id, 0), await published_ref(alice, run_id, 1)]


async def test_outcomes_count_once_per_event_id_and_only_for_the_tenant_that_owns_the_ref(world):
    alice, bob, run_id = world
    ref = await published_ref(alice, run_id)
    batch = [
        event(ref, "delivered", "d1", "a@example.org"), event(ref, "delivered", "d2", "b@example.org"),
        event(ref, "delivered", "d3", "c@example.org"), event(ref, "bounced", "b1", "d@example.org"),
        event(ref, "opened", "o1", "a@example.org"), event(ref, "opened", "o2", "b@example.org", machine=True),
        event(ref, "replied", "r1", "a@example.org", sentiment="positive"),
        event(ref, "delivered", "d1", "a@example.org"),  # the same id again in the batch
        event("eml_" + "a" * 20, "opened", "x1"),  # nobody's ref
        event(None, "opened", "x2"),
    ]
    answer = await alice.post("/outcomes", json={"events": batch})
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"accepted": 7, "duplicates": 1, "unattributed": 2}
    again = await alice.post("/outcomes", json={"events": batch[:3]})  # a sender's retry
    assert again.json() == {"accepted": 0, "duplicates": 3, "unattributed": 0}
    # Bob's events naming Alice's ref are unattributed: nothing of his reaches her run.
    theirs = await bob.post("/outcomes", json={"events": [event(ref, "replied", "bob-r1", "z@example.org")]})
    assert theirs.json() == {"accepted": 0, "duplicates": 0, "unattributed": 1}
    assert (await bob.get(f"/runs/{run_id}/outcomes")).status_code == 404

    seen = (await alice.get(f"/runs/{run_id}/outcomes")).json()
    [email] = [e for e in seen["data"] if e["ref"] == ref]
    assert {k: email[k] for k in ("iteration", "sends", "delivered", "opens", "machine_opens", "replies",
                                  "positive_replies", "bounces", "clicks")} == {
        "iteration": 1, "sends": 4, "delivered": 3, "opens": 1, "machine_opens": 1, "replies": 1,
        "positive_replies": 1, "bounces": 1, "clicks": 0}
    assert email["open_rate"] == pytest.approx(1 / 3) and email["reply_rate"] == pytest.approx(1 / 3)
    low, high = email["reply_rate_interval"]
    assert 0 < low < 1 / 3 < high < 1
    published = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["email"]
    assert email["judge_score"] == published["score"]
    assert seen["calibration"] == {"spearman": None, "n": 1}


async def test_a_concurrent_replay_of_one_batch_counts_each_event_once(world):
    alice, _, run_id = world
    detail = (await alice.get(f"/runs/{run_id}/iterations/1")).json()
    ref = detail["trajectories"][0]["email"]["ref"]
    batch = {"events": [event(ref, "delivered", f"replay-{n}", f"r{n}@example.org") for n in range(200)]}
    answers = await asyncio.gather(*(alice.post("/outcomes", json=batch) for _ in range(5)))
    assert all(a.status_code == 202 for a in answers)
    assert sum(a.json()["accepted"] for a in answers) == 200
    assert sum(a.json()["duplicates"] for a in answers) == 800
    [email] = [e for e in (await alice.get(f"/runs/{run_id}/outcomes")).json()["data"] if e["ref"] == ref]
    assert email["delivered"] == 200 and email["judge_score"] == detail["trajectories"][0]["judge_score"]


async def test_recipients_are_stored_only_as_keyed_hashes(world):
    alice, _, run_id = world
    ref = await published_ref(alice, run_id, 0)
    await alice.post("/outcomes", json={"events": [event(ref, "delivered", "hash-1", "Secret.Person@Example.org")]})
    database = alice._transport.app.state.services.db  # noqa: SLF001 - the rows as stored
    from sqlalchemy import select

    from app.outcomes.models import OutcomeRecord
    async with database.read() as session:
        stored = await session.scalar(select(OutcomeRecord.recipient).where(OutcomeRecord.event_id == "hash-1"))
    assert "secret" not in stored.lower() and len(stored) == 64
    assert stored != hashlib.sha256(b"secret.person@example.org").hexdigest()  # keyed, not a bare hash


@pytest.mark.parametrize("body, message", [
    ({"events": []}, "at least 1"),
    ({"events": [event("eml_x", "sent", "e1")]}, "type"),
    ({"events": [event("eml_x", "opened", "e1") | {"occurred_at": "yesterday"}]}, "occurred_at"),
    ({"events": [event("eml_x", "opened", "")]}, "id"),
    ({"events": [event("eml_x", "opened", "e1") | {"colour": "red"}]}, "colour"),
])
async def test_a_malformed_batch_is_a_422_naming_the_field(world, body, message):
    alice, _, _ = world
    answer = await alice.post("/outcomes", json=body)
    assert answer.status_code == 422 and message in answer.text


async def test_outcome_sources_belong_to_their_tenant_and_show_secrets_once(world):
    alice, bob, _ = world
    assert (await alice.post("/outcome-sources", json={"provider": "sendgrid"})).status_code == 422  # no key
    assert (await alice.post("/outcome-sources", json={"provider": "postmark", "secret": "whsec_abcdefgh"})).status_code == 422
    created = await alice.post("/outcome-sources", json={"provider": "postmark", "name": "transactional"})
    assert created.status_code == 201, created.text
    source = created.json()
    assert source["id"].startswith("src_") and source["url"] == f"/outcomes/hooks/{source['id']}"
    assert source["inbound_url"] == f"/outcomes/hooks/{source['id']}/inbound"
    assert source["basic_auth"]["username"] and len(source["basic_auth"]["password"]) >= 24
    shown = (await alice.get(f"/outcome-sources/{source['id']}")).json()
    assert "basic_auth" not in shown and "secret" not in shown
    assert source["id"] in [s["id"] for s in (await alice.get("/outcome-sources")).json()["data"]]
    assert (await bob.get(f"/outcome-sources/{source['id']}")).status_code == 404
    assert (await bob.delete(f"/outcome-sources/{source['id']}")).status_code == 404
    assert (await alice.delete(f"/outcome-sources/{source['id']}")).status_code == 204
    assert (await alice.get(f"/outcome-sources/{source['id']}")).status_code == 404


# ---------------------------------------------------------------- providers' webhooks and replies, signed as they sign


def sendgrid_source():
    private = ec.generate_private_key(ec.SECP256R1())
    der = private.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, base64.b64encode(der).decode()


def sendgrid_request(private, records: list[dict], at: int | None = None) -> tuple[bytes, dict]:
    body = json.dumps(records).encode()
    timestamp = str(at or int(time.time()))
    signature = private.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return body, {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
                  "X-Twilio-Email-Event-Webhook-Timestamp": timestamp, "Content-Type": "application/json"}


async def outcomes_of(alice, run_id: str, ref: str) -> dict:
    return next((e for e in (await alice.get(f"/runs/{run_id}/outcomes")).json()["data"] if e["ref"] == ref), {})


async def sent_to(alice, ref: str, *addresses: str) -> None:
    """The sender reports the email delivered to these addresses: replies from them then count."""
    events = [event(ref, "delivered", f"sent-{ref}-{address}", address) for address in addresses]
    assert (await alice.post("/outcomes", json={"events": events})).status_code == 202


async def test_sendgrid_events_signed_by_its_key_count_and_anything_else_is_a_401_storing_nothing(world):
    alice, bob, run_id = world
    ref = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["trajectories"][1]["email"]["ref"]
    private, public = sendgrid_source()
    assert (await alice.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": "bm90IGEga2V5"})).status_code == 422
    source = (await alice.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": public})).json()
    records = [
        {"email": "ann@example.org", "timestamp": 1763631000, "event": "delivered", "sg_event_id": "sg-d1", "codreamer_ref": ref},
        {"email": "ann@example.org", "timestamp": 1763631060, "event": "open", "sg_event_id": "sg-o1",
         "sg_machine_open": True, "codreamer_ref": ref},
        {"email": "ann@example.org", "timestamp": 1763631090, "event": "click", "sg_event_id": "sg-c1", "codreamer_ref": ref,
         "url": "https://example.org"},
        {"email": "ann@example.org", "timestamp": 1763631000, "event": "processed", "sg_event_id": "sg-p1", "codreamer_ref": ref},
    ]
    body, headers = sendgrid_request(private, records)
    tampered = body.replace(b"delivered", b"bounce")
    assert (await alice.post(source["url"], content=tampered, headers=headers)).status_code == 401
    stale_body, stale = sendgrid_request(private, records, at=int(time.time()) - 6 * 60)
    assert (await alice.post(source["url"], content=stale_body, headers=stale)).status_code == 401
    unsigned = {"Content-Type": "application/json"}
    assert (await alice.post(source["url"], content=body, headers=unsigned)).status_code == 401
    assert await outcomes_of(alice, run_id, ref) == {}  # nothing stored by any of those
    answer = await bob.post(source["url"], content=body, headers=headers)  # no API key needed, any caller's key ignored
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"accepted": 3, "duplicates": 0, "unattributed": 0}
    assert (await alice.post(source["url"], content=body, headers=headers)).json()["duplicates"] == 3  # SendGrid's retry
    seen = await outcomes_of(alice, run_id, ref)
    assert (seen["delivered"], seen["opens"], seen["machine_opens"], seen["clicks"]) == (1, 0, 1, 1)
    assert (await alice.post("/outcomes/hooks/src_unknown", content=body, headers=headers)).status_code == 404


async def test_a_providers_events_for_another_tenants_ref_are_acknowledged_and_not_attributed(world):
    alice, bob, run_id = world
    ref = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["trajectories"][1]["email"]["ref"]
    private, public = sendgrid_source()
    bobs = (await bob.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": public})).json()
    record = {"email": "eve@example.org", "timestamp": 1763631000, "event": "delivered", "sg_event_id": "sg-bob-1",
              "codreamer_ref": ref}
    body, headers = sendgrid_request(private, [record])
    before = await outcomes_of(alice, run_id, ref)
    answer = await bob.post(bobs["url"], content=body, headers=headers)
    assert answer.status_code == 200 and answer.json() == {"accepted": 0, "duplicates": 0, "unattributed": 1}
    assert await outcomes_of(alice, run_id, ref) == before


async def test_mailgun_tokens_are_used_once(world):
    alice, _, run_id = world
    ref = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["trajectories"][0]["email"]["ref"]
    key = secrets.token_hex(16)
    source = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": key})).json()

    def request(event_id: str, token: str) -> dict:
        timestamp = str(int(time.time()))
        signature = hmac.new(key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()
        return {"signature": {"timestamp": timestamp, "token": token, "signature": signature},
                "event-data": {"id": event_id, "event": "opened", "timestamp": time.time(), "recipient": "kim@example.org",
                               "user-variables": {"codreamer_ref": ref}, "client-info": {"bot": ""}}}

    token = secrets.token_hex(25)
    assert (await alice.post(source["url"], json=request("mg-1", token))).json()["accepted"] == 1
    replayed = await alice.post(source["url"], json=request("mg-2", token))  # a new body under a used token
    assert replayed.status_code == 401 and "used before" in replayed.text
    assert (await outcomes_of(alice, run_id, ref))["opens"] >= 1


async def test_resend_events_are_verified_by_their_svix_signature(world):
    alice, _, run_id = world
    ref = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["trajectories"][0]["email"]["ref"]
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    source = (await alice.post("/outcome-sources", json={"provider": "resend", "secret": secret})).json()
    body = json.dumps({"type": "email.delivered", "created_at": "2026-11-20T09:30:00.000Z", "data": {
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618", "created_at": "2026-11-20T09:29:58.000Z",
        "from": "Acme <sales@example.com>", "to": ["lee@example.org"], "subject": "Hello",
        "tags": {"codreamer_ref": ref}}})
    now = datetime.now(UTC)
    headers = {"svix-id": "msg_resend_1", "svix-timestamp": str(int(now.timestamp())),
               "svix-signature": Webhook(secret).sign("msg_resend_1", now, body), "Content-Type": "application/json"}
    assert (await alice.post(source["url"], content=body, headers=headers)).json()["accepted"] == 1
    headers["svix-signature"] = Webhook(secret).sign("msg_resend_1", now, body + " ")
    assert (await alice.post(source["url"], content=body, headers=headers)).status_code == 401


async def test_replies_count_by_in_reply_to_and_auto_replies_do_not(world):
    alice, _, run_id = world
    email = (await alice.get(f"/runs/{run_id}/iterations/0")).json()["email"]
    source = (await alice.post("/outcome-sources", json={"provider": "postmark"})).json()
    credentials = base64.b64encode(f"{source['basic_auth']['username']}:{source['basic_auth']['password']}".encode()).decode()

    def reply(message_id: str, *extra: str) -> bytes:
        return "\r\n".join([
            "From: Priya Raman <priya@saint-aldric.example>", "To: sales@example.com", f"Message-ID: <{message_id}@mx.example>",
            f"In-Reply-To: {email['message_id']}", "Subject: Re: " + email["subject"], "Date: Fri, 20 Nov 2026 10:00:00 +0000",
            *extra, "Content-Type: text/plain; charset=utf-8", "", "Yes, Thursday works.", "",
            "On Thu, 19 Nov 2026 Sales <sales@example.com> wrote:", "> " + email["body"].splitlines()[0],
        ]).encode()

    inbound = source["inbound_url"]
    headers = {"Content-Type": "message/rfc822", "Authorization": f"Basic {credentials}"}
    await sent_to(alice, email["ref"], "priya@saint-aldric.example")
    assert (await alice.post(inbound, content=reply("r-1"), headers={"Content-Type": "message/rfc822"})).status_code == 401
    assert (await alice.post(inbound, content=reply("r-1"), headers=headers)).json()["accepted"] == 1
    assert (await alice.post(inbound, content=reply("r-1"), headers=headers)).json()["duplicates"] == 1
    auto = reply("r-2", "Auto-Submitted: auto-replied")
    assert (await alice.post(inbound, content=auto, headers=headers)).json()["accepted"] == 1  # recorded...
    assert (await outcomes_of(alice, run_id, email["ref"]))["replies"] == 1  # ...but not a reply
    assert (await alice.post(inbound, content=b"not a message", headers=headers)).status_code == 422


async def test_a_sendgrid_inbound_parse_form_with_the_raw_message_is_a_reply(world):
    alice, _, run_id = world
    email = (await alice.get(f"/runs/{run_id}/iterations/1")).json()["email"]
    _, public = sendgrid_source()
    source = (await alice.post("/outcome-sources", json={"provider": "sendgrid", "verification_key": public})).json()
    raw = "\r\n".join(["From: Omar <omar@example.org>", f"To: sales+{email['ref']}@example.com", "Message-ID: <sg-in-1@mx>",
                       "Subject: Re: hi", "", "Send me the case study."])
    form = {"email": (None, raw), "to": (None, f"sales+{email['ref']}@example.com")}  # multipart, as SendGrid posts it
    answer = await alice.post(source["inbound_url"], files=form)
    assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    assert (await outcomes_of(alice, run_id, email["ref"]))["replies"] >= 1
    assert (await alice.post(source["inbound_url"], data={"text": "no raw message"})).status_code == 422
