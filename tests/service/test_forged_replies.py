"""Replies no stranger can forge (issue 53, item 3), on SQLite and PostgreSQL: a reply counts only from the address its
email went to; 200 replies to one draft from other addresses move no count, no prediction and no evaluation, and 10
such replies to a challenger's drafts promote nothing, where the same 10 from the prospects themselves do."""

import csv
import io
from email.message import EmailMessage

import pytest

from tests.support import learned, settled, two_tenants

BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo"], "max_turns": 3,
        "feedback_source": "none"}
PROSPECT = {"company": "Ledgerly", "role": "CFO", "industry": "saas", "pains": ["cloud invoices keep surprising us"]}
SENT, REPLIED = "2026-11-01T09:00:00Z", "2026-11-01T12:00:00Z"
RFC822 = {"Content-Type": "message/rfc822"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice with a finished one-iteration run on the demo graph."""
    async with two_tenants(request.param, tmp_path_factory.mktemp("forged"),
                           secret_key="test-secret-key-for-forged-replies") as (_, alice, _):
        yield alice, await learned(alice, BODY)


def reply(in_reply_to: str, sender: str, message_id: str, to: str = "sales@example.com") -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Message-ID"] = sender, to, message_id
    message["In-Reply-To"], message["Subject"] = in_reply_to, "Re: your email"
    message.set_content("Yes, let's talk on Thursday.")
    return message.as_bytes()


def address(prospect_id: str) -> str:
    return f"{prospect_id}@{prospect_id}-clinic.example"


async def evaluate(alice, policies: list[str]) -> dict:
    created = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": policies})).json()
    return (await settled(alice, f"/evaluations/{created['evaluation_id']}"))["result"]


async def test_replies_from_other_addresses_move_no_count_prediction_or_evaluation_and_promote_nothing(world):
    alice, run_id = world
    champion, challenger = f"{run_id}@1", f"{run_id}@0"
    deployed = await alice.put("/graphs/demo/deployment", json={
        "policy": champion, "challengers": [{"policy": challenger, "share": 0.5}], "auto_promote": True,
        "require_evidence": True, "force": True})
    assert deployed.status_code == 200, deployed.text
    prospects = [PROSPECT | {"id": f"f{n}", "name": f"Prospect {n}", "email": address(f"f{n}")} for n in range(60)]
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 3})).json()
    assert (await settled(alice, f"/draft-batches/{batch['batch_id']}"))["status"] == "succeeded"
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts", params={"limit": 100})).json()["data"]
    # honest outcomes: every draft delivered, every sixth prospect replied, whichever policy wrote to them
    events = []
    for n, draft in enumerate(drafts):
        ref, who = draft["email"]["ref"], draft["prospect"]["email"]
        events.append({"ref": ref, "type": "delivered", "occurred_at": SENT, "id": f"d-{ref}", "recipient": who})
        if n % 6 == 0:
            events.append({"ref": ref, "type": "replied", "occurred_at": REPLIED, "id": f"r-{ref}", "recipient": who})
    assert (await alice.post("/outcomes", json={"events": events})).json()["accepted"] == len(events)
    honest = await evaluate(alice, [challenger, champion])
    before = {p["policy"]: p for p in honest["policies"]}
    assert before[challenger]["predicted_reply"] is not None

    # the forger has the exported CSV: every draft's Message-ID
    exported = await alice.get(f"/draft-batches/{batch['batch_id']}/drafts", headers={"Accept": "text/csv"})
    message_ids = {row["prospect_id"]: row["message_id"] for row in csv.DictReader(io.StringIO(exported.text))}
    inbound = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32})).json()["inbound_url"]
    quiet = [d for n, d in enumerate(drafts) if n % 6]
    target = next(d for d in quiet if d["policy"] == champion)
    for k in range(200):  # 200 replies to one draft from 200 other addresses
        answer = await alice.post(inbound, headers=RFC822, content=reply(
            message_ids[target["prospect"]["id"]], f"crowd{k}@elsewhere.example", f"<crowd-{k}@mx.example>"))
        assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    forged = [d for d in quiet if d["policy"] == challenger][:10]
    assert len(forged) == 10
    for k, draft in enumerate(forged):  # one reply each to 10 of the challenger's quiet drafts, not from the prospect
        answer = await alice.post(inbound, headers=RFC822, content=reply(
            message_ids[draft["prospect"]["id"]], f"stranger{k}@elsewhere.example", f"<forged-{k}@mx.example>"))
        assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text

    outcomes = {o["ref"]: o for o in (await alice.get(f"/draft-batches/{batch['batch_id']}/outcomes")).json()["data"]}
    crowded = outcomes[target["email"]["ref"]]
    assert (crowded["delivered"], crowded["replies"], crowded["unverified_replies"]) == (1, 0, 200)
    assert all((outcomes[d["email"]["ref"]]["replies"], outcomes[d["email"]["ref"]]["unverified_replies"]) == (0, 1)
               for d in forged)
    assert sum(o["replies"] for o in outcomes.values()) == 10  # the honest ones: prospects 0, 6, …, 54

    after = {p["policy"]: p for p in (await evaluate(alice, [challenger, champion]))["policies"]}
    for policy in (challenger, champion):
        assert after[policy]["predicted_reply"]["value"] == pytest.approx(before[policy]["predicted_reply"]["value"], abs=0.005)
        assert after[policy]["off_policy"] == before[policy]["off_policy"]
        assert after[policy]["verified_recipients"] == before[policy]["verified_recipients"]
    current = (await alice.get("/graphs/demo/deployment")).json()
    assert current["policy"] == champion  # nothing promoted
    refused = await alice.put("/graphs/demo/deployment", json={"policy": challenger})
    assert refused.status_code == 409, refused.text

    # the same 10 replies from the addresses the drafts went to count, and put the challenger ahead
    for k, draft in enumerate(forged):
        answer = await alice.post(inbound, headers=RFC822, content=reply(
            message_ids[draft["prospect"]["id"]], draft["prospect"]["email"], f"<real-{k}@mx.example>"))
        assert answer.status_code == 200 and answer.json()["accepted"] == 1, answer.text
    real = {p["policy"]: p for p in (await evaluate(alice, [challenger, champion]))["policies"]}
    assert real[challenger]["verified_recipients"] == before[challenger]["verified_recipients"] + 10
    assert (await alice.get("/graphs/demo/deployment")).json()["policy"] == challenger  # auto-promoted


async def test_a_reply_counts_once_the_sender_reports_its_address_and_a_plus_address_reply_counts_once(world):
    alice, run_id = world
    prospects = [PROSPECT | {"id": "late", "name": "Late Lee"}, PROSPECT | {"id": "plus", "name": "Plus Pat",
                                                                           "email": address("plus")}]
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1", "prospects": prospects})).json()
    assert (await settled(alice, f"/draft-batches/{batch['batch_id']}"))["status"] == "succeeded"
    late, plus = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    inbound = (await alice.post("/outcome-sources", json={"provider": "mailgun", "signing_key": "k" * 32})).json()["inbound_url"]

    async def counts(ref: str) -> tuple[int, int, int]:
        found = {o["ref"]: o for o in (await alice.get(f"/draft-batches/{batch['batch_id']}/outcomes")).json()["data"]}[ref]
        return found["delivered"], found["replies"], found["unverified_replies"]

    # no address on the prospect: a reply is unverified until the sender reports the email delivered to its address
    ref = late["email"]["ref"]
    await alice.post(inbound, headers=RFC822, content=reply(late["email"]["message_id"], "lee@late.example", "<late-1@mx>"))
    assert await counts(ref) == (0, 0, 1)
    delivered = {"ref": ref, "type": "delivered", "occurred_at": SENT, "id": "late-d", "recipient": "Lee@Late.example"}
    assert (await alice.post("/outcomes", json={"events": [delivered]})).json()["accepted"] == 1
    assert await counts(ref) == (1, 1, 0)

    # sent to the email's plus-address from a colleague's address: its one recipient's reply, once however many come
    ref = plus["email"]["ref"]
    for k in range(3):
        answer = await alice.post(inbound, headers=RFC822, content=reply(
            "<unrelated@mx.example>", f"colleague{k}@elsewhere.example", f"<plus-{k}@mx>", to=f"sales+{ref}@example.com"))
        assert answer.json()["accepted"] == 1, answer.text
    assert await counts(ref) == (0, 1, 0)
