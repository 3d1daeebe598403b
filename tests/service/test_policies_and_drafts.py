"""What a run learns, put to work: policies by iteration, a deployment per graph, drafts for prospects the loop never
saw (JSON and CSV in, JSON pages and CSV out, outcomes attributed), and runs that continue from a policy."""

import asyncio
import csv
import io
import json

import pytest
from standardwebhooks.webhooks import Webhook

from app.knowledge_graph.service import demo_document
from app.policies import repository as policy_repository
from tests.drills import writer_failing_for
from tests.standins import Receiver
from tests.support import finished, learned, settled, two_tenants

SCENARIOS = ["scn-saas-cfo", "scn-healthcare-cto"]
BODY = {"iterations": 2, "rollouts_per_group": 2, "scenario_ids": SCENARIOS, "max_turns": 4, "feedback_source": "none"}
PROSPECTS = [
    {"id": "crm-1", "name": "Tomasz Nowak", "email": "tomasz@example.org", "company": "Ledgerly", "role": "CFO",
     "industry": "saas", "pains": ["cloud invoices keep surprising us at month-end", "no cost attribution per team"]},
    {"name": "Ines Duarte", "company": "Clinica Norte", "role": "CTO", "industry": "healthcare",
     "pains": ["patient data leaking into analytics", "HIPAA audits"], "goal": "Book a 20-minute call."},
    {"name": "Sam O'Neill", "company": "Moss & Partners", "role": "CFO", "industry": "saas",
     "pains": ["warehouse spend growing faster than revenue"]},
]


def copy_of_demo(graph_id: str) -> dict:
    return demo_document().model_dump() | {"id": graph_id, "name": "A copy of the demo"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice with a finished two-iteration run on the demo graph, and Bob, on one service, on each database."""
    async with two_tenants(request.param, tmp_path_factory.mktemp("drafts"), secret_key="test-secret-key-for-drafts",
                           message_id_domain="mail.example.test", webhook_allow_private=True) as (_, alice, bob):
        yield alice, bob, await learned(alice, BODY)


async def drafted(client, batch_id: str) -> dict:
    return await settled(client, f"/draft-batches/{batch_id}")


async def test_a_run_has_a_policy_per_recorded_iteration(world):
    alice, bob, run_id = world
    listed = (await alice.get(f"/runs/{run_id}/policies")).json()
    assert [p["id"] for p in listed["data"]] == [f"{run_id}@0", f"{run_id}@1", f"{run_id}@2"]
    assert listed["has_more"] is False
    untrained, latest = listed["data"][0], listed["data"][2]
    assert untrained["reward"] is None and untrained["training_step"] == 0 and untrained["backend"] == "embedded"
    assert latest["training_step"] >= 1 and latest["reward"]["count"] == 4 and latest["graph_id"] == "demo"
    assert (await alice.get(f"/policies/{run_id}")).json()["id"] == f"{run_id}@2"  # the run alone: its latest
    assert (await alice.get(f"/policies/{run_id}@1")).json() == listed["data"][1]
    page = (await alice.get(f"/runs/{run_id}/policies", params={"limit": 1, "after": 0})).json()
    assert [p["iteration"] for p in page["data"]] == [1] and page["has_more"] is True
    for missing in (f"{run_id}@3", "run_nope@0", "not a policy"):
        assert (await alice.get(f"/policies/{missing}")).status_code == 404
    assert (await bob.get(f"/policies/{run_id}@1")).status_code == 404
    assert (await bob.get(f"/runs/{run_id}/policies")).status_code == 404


async def test_a_deployment_is_promoted_and_rolled_back(world):
    alice, bob, run_id = world
    assert (await alice.get("/graphs/demo/deployment")).json() == {
        "graph_id": "demo", "policy": None, "share": None, "challengers": [], "require_evidence": False,
        "sequential": False, "traffic": "fixed", "floor": 0.01, "min_sends": 100, "auto_promote": False, "deployed_at": None,
        "webhook_url": None, "webhook_secret": None, "history": []}
    first = await alice.put("/graphs/demo/deployment", json={"policy": f"{run_id}@1"})
    assert first.status_code == 200, first.text
    second = (await alice.put("/graphs/demo/deployment", json={"policy": run_id})).json()
    assert second["policy"] == f"{run_id}@2" and [h["policy"] for h in second["history"]] == [f"{run_id}@2", f"{run_id}@1"]
    assert (await alice.get(f"/policies/{run_id}@2")).json()["deployed"] is True
    assert (await alice.get(f"/policies/{run_id}@1")).json()["deployed"] is False
    rolled_back = (await alice.put("/graphs/demo/deployment", json={"policy": f"{run_id}@1"})).json()
    assert rolled_back["policy"] == f"{run_id}@1" and len(rolled_back["history"]) == 3
    # the shared demo graph has a deployment per tenant: Bob's is his own
    assert (await bob.get("/graphs/demo/deployment")).json()["policy"] is None
    for policy, says in (("run_nope@1", "not found"), (f"{run_id}@9", "not found"), ("a b", "no policy id")):
        answer = await alice.put("/graphs/demo/deployment", json={"policy": policy})
        assert answer.status_code == 422 and says in answer.text, answer.text
    assert (await bob.put("/graphs/demo/deployment", json={"policy": f"{run_id}@1"})).status_code == 422
    assert (await alice.put("/graphs/nope/deployment", json={"policy": f"{run_id}@1"})).status_code == 404


async def test_a_policy_of_another_graph_is_refused_naming_both_graphs(world):
    alice, _, run_id = world
    assert (await alice.post("/graphs", json=copy_of_demo("demo-copy"))).status_code == 201
    answer = await alice.put("/graphs/demo-copy/deployment", json={"policy": f"{run_id}@2"})
    assert answer.status_code == 422 and "'demo'" in answer.text and "'demo-copy'" in answer.text
    drafts = await alice.post("/drafts", json={"graph_id": "demo-copy", "policy": f"{run_id}@2", "prospects": PROSPECTS})
    assert drafts.status_code == 422 and "'demo-copy'" in drafts.text
    no_deployment = await alice.post("/drafts", json={"graph_id": "demo-copy", "prospects": PROSPECTS})
    assert no_deployment.status_code == 422 and "no deployed policy" in no_deployment.text


async def test_drafts_are_written_with_the_deployment_for_prospects_never_seen(world):
    alice, _, run_id = world
    await alice.put("/graphs/demo/deployment", json={"policy": f"{run_id}@2"})
    created = await alice.post("/drafts", json={"graph_id": "demo", "prospects": PROSPECTS, "seed": 3})
    assert created.status_code == 202, created.text
    body = created.json()
    assert body["status"] == "queued" and body["count"] == 3 and body["links"]["drafts"].endswith("/drafts")
    batch = await drafted(alice, body["batch_id"])
    assert batch["status"] == "succeeded" and batch["completed"] == 3 and batch["policy"] == f"{run_id}@2", batch
    drafts = (await alice.get(body["links"]["drafts"])).json()["data"]
    assert [d["prospect"]["id"] for d in drafts] == ["crm-1", "p2", "p3"]
    assert [d["like"] for d in drafts] == ["scn-saas-cfo", "scn-healthcare-cto", "scn-saas-cfo"]
    graph_nodes = {n.id for n in demo_document().nodes}
    for draft, prospect in zip(drafts, PROSPECTS, strict=True):
        email = draft["email"]
        assert prospect["name"].split()[0] in email["body"], email["body"]  # written to this prospect, not a scenario's
        assert set(email["citations"]) <= graph_nodes and email["citations"]
        assert email["message_id"] == f"<{email['ref']}@mail.example.test>"
        assert draft["policy"] == f"{run_id}@2" and draft["variant"] == 0 and draft["propensity"] == 1.0
        assert 0.0 <= draft["judge_score"] <= 1.0
    assert drafts[1]["prospect"]["goal"] == "Book a 20-minute call."
    assert drafts[0]["prospect"]["goal"] is None  # a generic ask: the demo has no offers, and no scenario's goal is reused
    assert [d["fit"] for d in drafts] == ["high"] * 3 and all(d["fit_reason"] for d in drafts)
    assert len({d["email"]["ref"] for d in drafts}) == 3

    exported = await alice.get(body["links"]["drafts"], headers={"Accept": "text/csv"})
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [r["prospect_id"] for r in rows] == ["crm-1", "p2", "p3"]
    assert rows[0]["email"] == "tomasz@example.org" and rows[0]["codreamer_ref"] == drafts[0]["email"]["ref"]
    assert rows[2]["body"] == drafts[2]["email"]["body"] and rows[2]["message_id"] == drafts[2]["email"]["message_id"]

    # a draft's ref is attributed like any email's, and listed per prospect
    ref = drafts[0]["email"]["ref"]
    events = [{"ref": ref, "type": kind, "occurred_at": "2026-11-20T09:30:00Z", "id": f"draft-{kind}",
               "recipient": "tomasz@example.org"} for kind in ("delivered", "opened", "replied")]
    assert (await alice.post("/outcomes", json={"events": events})).json() == {"accepted": 3, "duplicates": 0, "unattributed": 0}
    outcomes = (await alice.get(f"/draft-batches/{body['batch_id']}/outcomes")).json()["data"]
    mine = next(o for o in outcomes if o["prospect_id"] == "crm-1")
    assert (mine["ref"], mine["delivered"], mine["opens"], mine["replies"], mine["clicks"]) == (ref, 1, 1, 1, 0)


async def test_a_csv_of_prospects_is_drafted_and_a_bad_row_names_its_line(world):
    alice, _, run_id = world
    rows = ["name,email,company,role,industry,pains,goal",
            "Ana Lima,ana@example.org,Cobalt,CFO,saas,month-end cloud invoices;no cost attribution,",
            '"Lee, Jr.",,Fenwick,CTO,healthcare,"PHI in analytics; audits",Book a call.']
    form = {"graph_id": "demo", "policy": f"{run_id}@1"}
    created = await alice.post("/drafts", data=form, files={"file": ("prospects.csv", "\n".join(rows), "text/csv")})
    assert created.status_code == 202, created.text
    assert (await drafted(alice, created.json()["batch_id"]))["status"] == "succeeded"
    drafts = (await alice.get(created.json()["links"]["drafts"])).json()["data"]
    assert [d["prospect"]["name"] for d in drafts] == ["Ana Lima", "Lee, Jr."]
    assert drafts[1]["prospect"]["pains"] == ["PHI in analytics", "audits"] and drafts[1]["prospect"]["email"] is None

    bad = rows + ["Kim Park,kim@example.org,Orbit,,,,"]  # line 4: no pains, and no role or industry to write to
    answer = await alice.post("/drafts", data=form, files={"file": ("p.csv", "\n".join(bad), "text/csv")})
    assert answer.status_code == 422 and "line 4: a prospect without pains" in answer.text, answer.text
    bad = rows + ["Kim Park,kim@example.org,,CTO,saas,a pain,"]  # line 4: no company
    answer = await alice.post("/drafts", data=form, files={"file": ("p.csv", "\n".join(bad), "text/csv")})
    assert answer.status_code == 422 and "line 4" in answer.text and "company" in answer.text, answer.text
    nameless = rows[:2] + [",x@example.org,Orbit,CTO,saas,a pain,"]
    answer = await alice.post("/drafts", data=form, files={"file": ("p.csv", "\n".join(nameless), "text/csv")})
    assert answer.status_code == 422 and "line 3" in answer.text and "name" in answer.text
    answer = await alice.post("/drafts", data=form, files={"file": ("p.csv", "who,what\n1,2", "text/csv")})
    assert answer.status_code == 422 and "line 1" in answer.text


async def test_drafts_take_prospects_as_sales_tools_export_them_signed_by_the_sender_with_their_fit(world):
    """first_name/last_name, title and company_name; extra fields kept as custom; the graph's sender, overridden by the
    batch's; the graph's offer for the role as the ask; a prospect no fact answers skipped with the reason."""
    alice, _, _ = world
    document = copy_of_demo("demo-offers") | {
        "sender": {"name": "Sam Rivera", "title": "Account Executive"},
        "offers": [{"roles": ["CFO"], "ask": "Book a 30-minute call to review a cloud cost estimate."}]}
    assert (await alice.post("/graphs", json=document)).status_code == 201
    run = (await alice.post("/learn-loop", json=BODY | {"graph_id": "demo-offers", "iterations": 1})).json()["run_id"]
    assert (await finished(alice, run, timeout=300))["status"] == "succeeded"
    assert (await alice.get(f"/runs/{run}")).json()["config"]["sender"] == document["sender"] | {"signature": None}
    policy = (await alice.post("/policies", json={"from": f"{run}@1"})).json()
    prospects = [
        {"first_name": "Anna", "last_name": "Schmidt", "title": "CFO", "company_name": "Kaufhaus Nord", "industry": "retail",
         "pains": ["no cost attribution per team"], "linkedin": "https://example.org/in/anna", "score": 7},
        {"name": "Dr. Priya Nair", "company": "Saint Aldric Health", "role": "CTO", "industry": "healthcare",
         "pains": ["PHI leaking into analytics tools"]},
        {"name": "Nguyễn Thị Lan", "company": "Lotus Fashion", "role": "VP Marketing", "industry": "fashion",
         "pains": ["low open rates on newsletters", "brand awareness in Europe"]},
    ]
    body = {"graph_id": "demo-offers", "policy": policy["id"], "prospects": prospects, "skip_low_fit": True}
    created = await alice.post("/drafts", json=body)
    assert created.status_code == 202, created.text
    batch = await drafted(alice, created.json()["batch_id"])
    assert batch["sender"] == {"name": "Sam Rivera", "title": "Account Executive", "signature": None}
    assert batch["skip_low_fit"] is True
    drafts = (await alice.get(created.json()["links"]["drafts"])).json()["data"]
    anna, priya, lan = drafts
    assert anna["prospect"]["custom"] == {"linkedin": "https://example.org/in/anna", "score": "7"}
    assert (anna["prospect"]["name"], anna["prospect"]["role"], anna["prospect"]["company"]) == (
        "Anna Schmidt", "CFO", "Kaufhaus Nord")
    assert anna["prospect"]["goal"] == "Book a 30-minute call to review a cloud cost estimate."  # the CFO offer
    assert priya["prospect"]["goal"] is None
    for draft, greeted in ((anna, ("Anna",)), (priya, ("Priya", "Dr. Nair"))):
        assert draft["fit"] == "high" and draft["email"]["body"].splitlines()[0].endswith(tuple(f" {g}," for g in greeted))
        assert "Sam Rivera\nAccount Executive" in draft["email"]["body"] and "Alex" not in draft["email"]["body"]
    assert "Dr.," not in priya["email"]["body"]
    assert lan["fit"] == "low" and lan["email"] is None and "low open rates" in lan["fit_reason"]
    assert "skips low fits" in lan["fit_reason"]

    body |= {"sender": {"name": "Jo Park", "signature": "Jo Park | Lumora Systems"}, "skip_low_fit": False}
    batch = await drafted(alice, (await alice.post("/drafts", json=body)).json()["batch_id"])
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    assert all(d["email"]["body"].endswith("Jo Park | Lumora Systems") for d in drafts)
    low = drafts[2]
    assert low["fit"] == "low" and low["email"] is not None and "skips" not in low["fit_reason"]
    assert set(low["email"]["citations"]) <= {"company-lumora"}  # drafted, pitching nothing: only the seller named


@pytest.mark.parametrize("change, says", [
    ({"prospects": [PROSPECTS[0]] * 1001}, "1000"),
    ({"prospects": [PROSPECTS[0] | {"pains": [], "role": None, "industry": None}]}, "pains"),
    ({"prospects": [PROSPECTS[0] | {"company_name": "Other"}]}, "company_name"),
    ({"prospects": [PROSPECTS[0] | {"notes": {"nested": "object"}}]}, "custom field"),
    ({"prospects": [PROSPECTS[0] | {"name": " "}]}, "name"),
    ({"prospects": [PROSPECTS[0], PROSPECTS[0]]}, "twice"),
    ({"prospects": [PROSPECTS[1] | {"id": "p2"}, PROSPECTS[2]]}, "position 1 gets"),
    ({"prospects": []}, "prospects"),
    ({"graph_id": "nope"}, "graph_id"),
])
async def test_bad_draft_requests_are_422s_naming_the_field_and_store_nothing(world, change, says):
    alice, _, run_id = world
    before = (await alice.get(f"/runs/{run_id}/policies")).status_code
    answer = await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1", "prospects": PROSPECTS} | change)
    assert answer.status_code == 422 and says in answer.text, answer.text
    assert before == 200


async def test_the_same_idempotency_key_gives_the_same_batch(world):
    alice, _, run_id = world
    body = {"graph_id": "demo", "policy": f"{run_id}@1", "prospects": PROSPECTS[:1]}
    first = await alice.post("/drafts", json=body, headers={"Idempotency-Key": "drafts-1"})
    again = await alice.post("/drafts", json=body, headers={"Idempotency-Key": "drafts-1"})
    other = await alice.post("/drafts", json=body | {"seed": 9}, headers={"Idempotency-Key": "drafts-1"})
    assert (first.status_code, again.status_code, other.status_code) == (202, 200, 409)
    assert again.json()["batch_id"] == first.json()["batch_id"]
    await drafted(alice, first.json()["batch_id"])


async def test_a_run_continues_from_a_policy(world):
    alice, _, _ = world
    # four rollouts a group, so that they differ in what they cite and node scores move
    run_id = (await alice.post("/learn-loop", json=BODY | {"rollouts_per_group": 4})).json()["run_id"]
    assert (await finished(alice, run_id, timeout=300))["status"] == "succeeded"
    scores = {scenario: (await alice.get(f"/runs/{run_id}/node-scores",
                                         params={"iteration": 2, "scenario_id": scenario})).json()["scores"]
              for scenario in SCENARIOS}
    # two rollouts a group can cite the same facts and move no score: the scenario whose scores moved is the one kept
    moved = [scenario for scenario in SCENARIOS if any(score != 1.0 for score in scores[scenario].values())]
    assert moved, scores
    trained = moved[0]
    continued = await alice.post("/learn-loop", json=BODY | {"iterations": 1, "init_from": f"{run_id}@2",
                                                            "scenario_ids": [trained, "scn-fintech-cto"]})
    assert continued.status_code == 202, continued.text
    new_id = continued.json()["run_id"]
    run = await finished(alice, new_id, timeout=300)
    assert run["status"] == "succeeded" and run["config"]["init_from"] == f"{run_id}@2"
    start = (await alice.get(f"/runs/{new_id}/node-scores", params={"iteration": 0, "scenario_id": trained})).json()
    assert start["scores"] == scores[trained]  # the policy's scores, not all 1.0
    # a scenario the policy never trained on starts from the one it is most like
    fintech = (await alice.get(f"/runs/{new_id}/node-scores", params={"iteration": 0, "scenario_id": "scn-fintech-cto"})).json()
    assert fintech["scores"] in list(scores.values())
    assert (await alice.get(f"/policies/{new_id}@0")).json()["training_step"] == 0
    assert (await alice.get(f"/policies/{run_id}@2")).json()["kept"] is True  # forked, so kept

    for init_from, says in ((f"{run_id}@7", "not found"), ("nope@1", "not found")):
        answer = await alice.post("/learn-loop", json=BODY | {"init_from": init_from})
        assert answer.status_code == 422 and says in answer.text
    other_graph = await alice.post("/learn-loop", json=BODY | {"graph_id": "demo-copy", "init_from": f"{run_id}@2"})
    assert other_graph.status_code == 422 and "'demo-copy'" in other_graph.text


async def test_a_batch_tells_its_webhook_when_it_ends_signed_with_its_own_secret(world):
    alice, _, run_id = world
    receiver = Receiver(lambda n: (503, 0.0) if n == 0 else (200, 0.0))  # the first attempt fails and is retried
    try:
        created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@2", "prospects": PROSPECTS[:1],
                                                     "webhook_url": receiver.url + "?token=t0ken"})).json()
        assert created["webhook_secret"].startswith("whsec_")
        assert (await drafted(alice, created["batch_id"]))["status"] == "succeeded"
        for _ in range(300):
            if receiver.delivered():
                break
            await asyncio.sleep(0.1)
        [first, delivered] = receiver.requests
        assert first["headers"]["webhook-id"] == delivered["headers"]["webhook-id"] and delivered["path"] == "/hooks?token=t0ken"
        headers = {k.lower(): v for k, v in delivered["headers"].items()}
        event = Webhook(created["webhook_secret"]).verify(delivered["body"], headers)
        assert event["type"] == "draft_batch.succeeded"
        assert event["data"] == {"batch_id": created["batch_id"], "seq": 1, "status": "succeeded", "count": 1,
                                 "completed": 1, "policy": f"{run_id}@2", "error": None}
        # the webhook is the batch's event, delivered by the outbox: its delivery log and its events list say so
        [listed] = (await alice.get(f"/draft-batches/{created['batch_id']}/events")).json()["data"]
        assert (listed["id"], listed["type"], listed["data"]) == (delivered["headers"]["webhook-id"], event["type"],
                                                                  event["data"])
    finally:
        receiver.close()


async def test_a_batchs_events_are_listed_and_streamed_as_a_runs_are_and_only_to_its_tenant(world):
    alice, bob, run_id = world
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@2",
                                                 "prospects": PROSPECTS[:1]})).json()
    assert (await drafted(alice, created["batch_id"]))["status"] == "succeeded"
    path = f"/draft-batches/{created['batch_id']}/events"
    listed = (await alice.get(path)).json()
    assert listed["has_more"] is False and [(e["seq"], e["type"]) for e in listed["data"]] == [(1, "draft_batch.succeeded")]
    assert (await alice.get(path, params={"after": 1})).json() == {"data": [], "has_more": False}
    # the finished batch's stream gives its events, then ends; caught up, 204 (EventSource stops reconnecting)
    streamed = await alice.get(path, headers={"Accept": "text/event-stream"})
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    [block] = [b for b in streamed.text.split("\n\n") if "data: " in b]
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    assert (fields["id"], fields["event"], json.loads(fields["data"])) == ("1", "draft_batch.succeeded",
                                                                          listed["data"][0]["data"])
    caught_up = await alice.get(path, headers={"Accept": "text/event-stream", "Last-Event-ID": "1"})
    assert caught_up.status_code == 204
    for stranger in ((await bob.get(path)), (await bob.get(path, headers={"Accept": "text/event-stream"}))):
        assert stranger.status_code == 404
    assert (await alice.get(path, params={"after": -1})).status_code == 422


async def test_a_dead_batch_webhook_never_holds_the_batch(world):
    """A receiver that always fails: the batch's workflow ends at once (its event written), and the relay retries the
    delivery, not the workflow."""
    from dbos import DBOS

    alice, _, run_id = world
    receiver = Receiver(lambda n: (503, 0.0))
    try:
        created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@2", "prospects": PROSPECTS[:1],
                                                     "webhook_url": receiver.url})).json()
        assert (await drafted(alice, created["batch_id"]))["status"] == "succeeded"
        for _ in range(100):  # the batch's workflow ends right after the batch, whatever its receiver answers
            status = await DBOS.get_workflow_status_async(created["batch_id"])
            if status.status == "SUCCESS":
                break
            await asyncio.sleep(0.1)
        assert status.status == "SUCCESS"
        for _ in range(300):
            if receiver.requests:
                break
            await asyncio.sleep(0.1)
        assert receiver.requests and receiver.requests[0]["headers"]["webhook-id"] == (
            await alice.get(f"/draft-batches/{created['batch_id']}/events")).json()["data"][0]["id"]
    finally:
        receiver.close()


MANY = [{"name": f"Prospect {n}", "company": f"Company {n}", "role": "CFO", "industry": "saas",
         "pains": ["cloud invoices surprise us"]} for n in range(60)]  # three chunks: 25, 25 and 10


async def test_a_batchs_chunks_are_workflows_of_their_own_and_it_ends_once_after_all_of_them(world):
    from dbos import DBOS

    from app import tasks

    alice, _, run_id = world
    receiver = Receiver()
    try:
        created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@2", "prospects": MANY,
                                                     "webhook_url": receiver.url})).json()
        batch = await drafted(alice, created["batch_id"])
        assert batch["status"] == "succeeded" and batch["completed"] == 60, batch
        chunks = await DBOS.list_workflows_async(parent_workflow_id=created["batch_id"], queue_name=tasks.DRAFT_CHUNKS.name)
        assert sorted((c.status, c.output) for c in chunks) == [("SUCCESS", 10), ("SUCCESS", 25), ("SUCCESS", 25)]
        paged, after = [], -1
        while True:  # every draft once, in prospect order, each page after the last one's position
            page = (await alice.get(created["links"]["drafts"], params={"limit": 25, "after": after})).json()
            paged += page["data"]
            if not page["has_more"]:
                break
            after = page["data"][-1]["position"]
        assert [d["position"] for d in paged] == list(range(60))
        assert [d["prospect"]["id"] for d in paged] == [p.get("id") or f"p{n + 1}" for n, p in enumerate(MANY)]
        for _ in range(300):
            if receiver.delivered():
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # time for a second notification, were there one
        [delivered] = receiver.requests
        assert '"completed":60' in delivered["body"]
    finally:
        receiver.close()


async def test_a_failed_chunk_fails_its_batch_once_every_other_chunk_has_ended(world, monkeypatch):
    from app.drafts import workflow

    alice, _, run_id = world
    monkeypatch.setattr(workflow, "write_for", writer_failing_for("Prospect 30"))  # in the second chunk
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@2", "prospects": MANY})).json()
    batch = await drafted(alice, created["batch_id"])
    # the first and third chunks drafted before the batch ended; the second stored nothing
    assert (batch["status"], batch["completed"]) == ("failed", 35), batch
    assert batch["error"] == {"message": "Prospect 30 cannot be written to", "step": "draft"}
    drafts = (await alice.get(created["links"]["drafts"], params={"limit": 100})).json()["data"]
    assert [n for n, d in enumerate(drafts) if d["email"]] == [*range(25), *range(50, 60)]


async def evaluated(client, evaluation_id: str, timeout: float = 300) -> dict:
    for _ in range(int(timeout / 0.1)):
        evaluation = (await client.get(f"/evaluations/{evaluation_id}")).json()
        if evaluation["status"] in ("succeeded", "failed"):
            return evaluation
        await asyncio.sleep(0.1)
    raise AssertionError(f"evaluation {evaluation_id} did not finish")


async def test_challengers_draft_their_share_and_a_gated_promotion_waits_for_the_evidence(world, monkeypatch):
    alice, bob, run_id = world
    champion, challenger = f"{run_id}@2", f"{run_id}@1"
    deployed = await alice.put("/graphs/demo/deployment", json={  # forced: whatever an earlier test left deployed
        "policy": champion, "challengers": [{"policy": challenger, "share": 0.3}], "require_evidence": True, "force": True})
    assert deployed.status_code == 200, deployed.text
    assert deployed.json()["share"] == pytest.approx(0.7) and deployed.json()["challengers"] == [
        {"policy": challenger, "share": 0.3}] and deployed.json()["require_evidence"] is True
    prospects = [PROSPECTS[n % 3] | {"id": f"w{n}", "name": f"Prospect {n}"} for n in range(40)]
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 5})).json()
    assert (await drafted(alice, batch["batch_id"]))["status"] == "succeeded"
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    variants = [d["variant"] for d in drafts]
    assert set(variants) == {0, 1}
    for draft in drafts:  # each draft names the policy drawn for it, and the chance it had
        assert (draft["policy"], draft["propensity"]) == ((champion, 0.7) if draft["variant"] == 0 else (challenger, 0.3))

    # Before any evidence: a gated promotion is refused, saying why; forced, it is recorded as such.
    refused = await alice.put("/graphs/demo/deployment", json={"policy": challenger})
    assert refused.status_code == 409 and "no evaluation compares" in refused.text
    none_yet = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [challenger, champion]})).json()
    report = await evaluated(alice, none_yet["evaluation_id"])
    assert report["status"] == "succeeded", report
    for policy in report["result"]["policies"]:
        if policy["policy"] == challenger:  # none of its drafts sent yet: no estimate, and the reason, never a zero
            assert policy["off_policy"]["ips"] is None and policy["off_policy"]["reason"] in (  # as earlier tests left it
                "no logged sends older than the reply window",
                "it had no share in any batch whose sends have a known outcome")
        assert policy["held_out"] == 8 and 0 <= policy["judge"]["low"] <= policy["judge"]["value"] <= policy["judge"]["high"] <= 1
    assert (await alice.put("/graphs/demo/deployment", json={"policy": challenger})).status_code == 409

    # The sends come back: every challenger's draft got a reply, no champion's did.
    events = []
    for draft in drafts:
        ref, who = draft["email"]["ref"], draft["prospect"]["id"] + "@example.org"
        events.append({"ref": ref, "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z", "id": f"ev-d-{ref}", "recipient": who})
        if draft["variant"] == 1:
            events.append({"ref": ref, "type": "replied", "occurred_at": "2026-11-01T12:00:00Z", "id": f"ev-r-{ref}",
                           "recipient": who, "category": "interested"})
    assert (await alice.post("/outcomes", json={"events": events})).json()["unattributed"] == 0
    evidence = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [challenger, champion]})).json()
    report = await evaluated(alice, evidence["evaluation_id"])
    by_policy = {p["policy"]: p["off_policy"] for p in report["result"]["policies"]}
    assert report["result"]["predicted_reply_reason"] is None
    assert all(0 < p["predicted_reply"]["value"] < 1 for p in report["result"]["policies"])
    assert by_policy[challenger]["n"] == 40 and by_policy[challenger]["matched"] == variants.count(1)
    assert by_policy[challenger]["snips"]["value"] == 1.0 and by_policy[champion]["snips"]["value"] < 0.1
    assert by_policy[challenger]["dr"]["low"] > by_policy[champion]["dr"]["high"]
    # a later evaluation that does not compare both leaves the evidence standing, however many pages back it is
    monkeypatch.setattr(policy_repository, "EVALUATIONS_PAGE", 1)
    later = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [champion]})).json()
    assert (await evaluated(alice, later["evaluation_id"]))["status"] == "succeeded"
    promoted = await alice.put("/graphs/demo/deployment", json={"policy": challenger})
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["history"][0] == promoted.json()["history"][0] | {
        "policy": challenger, "forced": False, "evaluation": evidence["evaluation_id"]}
    # a rollback is a promotion too: gated, so it is forced here, and recorded as such
    rolled_back = (await alice.put("/graphs/demo/deployment", json={"policy": champion, "force": True})).json()
    assert rolled_back["history"][0]["forced"] is True and rolled_back["require_evidence"] is True

    assert (await bob.get(f"/evaluations/{evidence['evaluation_id']}")).status_code == 404
    foreign = await bob.post("/evaluations", json={"graph_id": "demo", "policies": [champion]})
    assert foreign.status_code == 422 and "not found" in foreign.text


async def test_before_any_outcome_an_evaluation_predicts_no_reply_rate_and_says_why(world):
    _, bob, _ = world  # Bob has sent nothing on the demo graph
    run_id = (await bob.post("/learn-loop", json=BODY | {"iterations": 1})).json()["run_id"]
    assert (await finished(bob, run_id, timeout=300))["status"] == "succeeded"
    created = (await bob.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@1", f"{run_id}@0"]})).json()
    result = (await evaluated(bob, created["evaluation_id"]))["result"]
    assert "no email sent on this graph has a known outcome" in result["predicted_reply_reason"]
    for policy in result["policies"]:  # null, never a zero
        assert policy["predicted_reply"] is None and policy["off_policy"]["dr"] is None, policy
        assert policy["held_out"] == 8 and policy["judge"] is not None
    twice = await bob.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@1", run_id]})
    assert twice.status_code == 422 and "policies.1" in twice.text and "names before" in twice.text, twice.text
    same_prospect = await bob.post("/evaluations", json={"graph_id": "demo", "policies": [run_id],
                                                         "prospects": [PROSPECTS[0], PROSPECTS[0]]})
    assert same_prospect.status_code == 422 and "appears twice" in same_prospect.text, same_prospect.text


@pytest.mark.parametrize("body, says", [
    ({"challengers": [{"policy": "{run}@1", "share": 0.6}, {"policy": "{run}@0", "share": 0.6}]}, "over 1"),
    ({"challengers": [{"policy": "{run}@2", "share": 0.2}]}, "twice"),
    ({"challengers": [{"policy": "run_nope@1", "share": 0.2}]}, "challengers"),
    ({"challengers": [{"policy": "{run}@1", "share": 0}]}, "share"),
])
async def test_bad_challengers_are_422s_naming_the_field(world, body, says):
    alice, _, run_id = world
    body = {"policy": f"{run_id}@2"} | {"challengers": [c | {"policy": c["policy"].format(run=run_id)} for c in body["challengers"]]}
    answer = await alice.put("/graphs/demo/deployment", json=body)
    assert answer.status_code == 422 and says in answer.text, answer.text


async def test_auto_traffic_and_auto_promotion(world):
    alice, _, run_id = world
    champion, challenger = f"{run_id}@0", f"{run_id}@2"
    deployed = await alice.put("/graphs/demo/deployment", json={
        "policy": champion, "challengers": [{"policy": challenger}], "traffic": "auto", "floor": 0.1, "min_sends": 5,
        "auto_promote": True, "force": True})
    assert deployed.status_code == 200, deployed.text
    assert deployed.json()["traffic"] == "auto" and deployed.json()["share"] is None
    prospects = [PROSPECTS[n % 3] | {"id": f"a{n}", "name": f"Auto {n}"} for n in range(30)]
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 11})).json()
    assert (await drafted(alice, batch["batch_id"]))["status"] == "succeeded"
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    # champion @0 has no sends of its own yet: an even split, logged as each draft's propensity
    assert {d["propensity"] for d in drafts} == {0.5}
    events = []
    for draft in drafts:
        ref, who = draft["email"]["ref"], draft["prospect"]["id"] + "@example.org"
        events.append({"ref": ref, "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z", "id": f"auto-d-{ref}", "recipient": who})
        if draft["policy"] == challenger:
            events.append({"ref": ref, "type": "replied", "occurred_at": "2026-11-01T12:00:00Z", "id": f"auto-r-{ref}",
                           "recipient": who, "category": "interested"})
    await alice.post("/outcomes", json={"events": events})
    later = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects[:4], "seed": 12})).json()
    await drafted(alice, later["batch_id"])
    shares = {d["policy"]: d["propensity"] for d in (await alice.get(f"/draft-batches/{later['batch_id']}/drafts")).json()["data"]}
    batch_arms = {champion, challenger} & set(shares)
    assert all(shares[p] > 0.5 for p in batch_arms if p == challenger) and all(shares[p] < 0.5 for p in batch_arms if p == champion)
    evaluation = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [challenger, champion]})).json()
    assert (await evaluated(alice, evaluation["evaluation_id"]))["status"] == "succeeded"
    now = (await alice.get("/graphs/demo/deployment")).json()
    assert now["policy"] == challenger and now["history"][0]["evaluation"] == evaluation["evaluation_id"]
    assert [c["policy"] for c in now["challengers"]] == [champion]  # the old champion keeps drafting beside it
    other = (await alice.post("/learn-loop", json=BODY | {"iterations": 1})).json()["run_id"]
    assert (await finished(alice, other, timeout=300))["status"] == "succeeded"
    assert (await alice.put("/graphs/demo/deployment", json={
        "policy": challenger, "challengers": [{"policy": f"{other}@1", "share": 0.2}]})).status_code == 200
    kept = (await alice.get(f"/policies/{other}@1")).json()
    assert (await alice.delete(f"/runs/{other}")).status_code == 204  # a challenger's run goes; the policy stays
    refused = await alice.delete(f"/policies/{kept['id']}")  # a challenger drafts too
    assert refused.status_code == 409 and "'demo'" in refused.text
    assert [c["policy"] for c in (await alice.get("/graphs/demo/deployment")).json()["challengers"]] == [f"{other}@1"]


@pytest.mark.parametrize("body, says", [
    ({"challengers": [{"policy": "{run}@1", "share": 0.05}], "floor": 0.1}, "below the floor"),
    ({"challengers": [{"policy": "{run}@1", "share": 0.3}], "traffic": "auto"}, "computed"),
    ({"challengers": [{"policy": "{run}@1"}], "traffic": "fixed"}, "required"),
])
async def test_bad_traffic_settings_are_422s(world, body, says):
    alice, _, run_id = world
    body = {"policy": f"{run_id}@2"} | body | {"challengers": [c | {"policy": c["policy"].format(run=run_id)} for c in body["challengers"]]}
    answer = await alice.put("/graphs/demo/deployment", json=body)
    assert answer.status_code == 422 and says in answer.text, answer.text


async def test_a_policy_whose_drafts_were_sent_is_deleted_only_with_its_sends_discarded(world):
    alice, _, run_id = world
    other = (await alice.post("/learn-loop", json=BODY | {"iterations": 1})).json()["run_id"]
    assert (await finished(alice, other, timeout=300))["status"] == "succeeded"
    champion, challenger = f"{run_id}@2", f"{other}@1"
    assert (await alice.put("/graphs/demo/deployment", json={
        "policy": champion, "challengers": [{"policy": challenger, "share": 0.5}], "force": True})).status_code == 200
    prospects = [PROSPECTS[n % 3] | {"id": f"s{n}", "name": f"Sent {n}"} for n in range(12)]
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 3})).json()
    assert (await drafted(alice, batch["batch_id"]))["status"] == "succeeded"
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    assert {d["policy"] for d in drafts} == {champion, challenger}
    events = [{"ref": d["email"]["ref"], "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z",
               "id": f"sent-{d['email']['ref']}", "recipient": d["prospect"]["id"] + "@example.org"} for d in drafts]
    assert (await alice.post("/outcomes", json={"events": events})).json()["unattributed"] == 0
    assert (await alice.put("/graphs/demo/deployment", json={"policy": champion, "force": True})).status_code == 200
    created = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [f"{other}@0", champion]})).json()
    never_drafted = (await evaluated(alice, created["evaluation_id"]))["result"]["policies"][0]
    assert never_drafted["off_policy"]["reason"] == "it had no share in any batch whose sends have a known outcome"

    # the run goes, its drafted-with policy and the sends stay
    kept = (await alice.get(f"/policies/{challenger}")).json()
    assert kept["kept"] is True and kept["id"].startswith("pol_")
    assert (await alice.delete(f"/runs/{other}")).status_code == 204
    assert (await alice.get(f"/runs/{other}")).status_code == 404
    outcomes = (await alice.get(f"/draft-batches/{batch['batch_id']}/outcomes")).json()["data"]
    assert len(outcomes) == len(drafts)
    # its sends are evidence the champion's evaluations read: the policy goes only if the request discards them
    refused = await alice.delete(f"/policies/{kept['id']}")
    assert refused.status_code == 409 and "discard_sends" in refused.text and "'demo'" in refused.text, refused.text
    assert (await alice.get(f"/policies/{kept['id']}")).status_code == 200
    assert (await alice.delete(f"/policies/{kept['id']}", params={"discard_sends": "true"})).status_code == 204
    assert (await alice.get(f"/policies/{kept['id']}")).status_code == 404
    assert (await alice.get(f"/policies/{challenger}")).status_code == 404  # the alias with it: its run is gone
    outcomes = (await alice.get(f"/draft-batches/{batch['batch_id']}/outcomes")).json()["data"]
    assert len(outcomes) == sum(d["policy"] == champion for d in drafts)

    # a batch goes with the policy that drafted it as the champion: its challengers' sent drafts too
    third = (await alice.post("/learn-loop", json=BODY | {"iterations": 1})).json()["run_id"]
    assert (await finished(alice, third, timeout=300))["status"] == "succeeded"
    assert (await alice.put("/graphs/demo/deployment", json={
        "policy": f"{third}@1", "challengers": [{"policy": champion, "share": 0.5}], "force": True})).status_code == 200
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 4})).json()
    assert (await drafted(alice, batch["batch_id"]))["status"] == "succeeded"
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    events = [{"ref": d["email"]["ref"], "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z",
               "id": f"third-{d['email']['ref']}", "recipient": d["prospect"]["id"] + "@example.org"}
              for d in drafts if d["policy"] == champion]  # only the challenger's drafts were sent
    assert events and (await alice.post("/outcomes", json={"events": events})).json()["accepted"] == len(events)
    assert (await alice.put("/graphs/demo/deployment", json={"policy": champion, "force": True})).status_code == 200
    third_policy = (await alice.get(f"/policies/{third}@1")).json()["id"]
    refused = await alice.delete(f"/policies/{third_policy}")
    assert refused.status_code == 409 and f"{len(events)} drafts" in refused.text, refused.text
    assert (await alice.delete(f"/policies/{third_policy}", params={"discard_sends": "true"})).status_code == 204
    assert (await alice.get(f"/draft-batches/{batch['batch_id']}")).status_code == 404


async def test_shares_over_one_by_a_rounding_error_leave_the_champion_nothing_rather_than_less(world):
    alice, _, run_id = world
    answer = await alice.put("/graphs/demo/deployment", json={
        "policy": f"{run_id}@2", "floor": 0, "force": True,
        "challengers": [{"policy": f"{run_id}@1", "share": 0.5}, {"policy": f"{run_id}@0", "share": 0.5000000009}]})
    assert answer.status_code == 200 and answer.json()["share"] == 0.0, answer.text


async def test_a_kept_policy_outlives_its_run_drafts_and_is_forked(world):
    alice, bob, _ = world
    run = (await alice.post("/learn-loop", json=BODY | {"iterations": 1})).json()["run_id"]
    assert (await finished(alice, run, timeout=300))["status"] == "succeeded"
    # kept once, however many ask at the same time
    answers = await asyncio.gather(*(alice.post("/policies", json={"from": f"{run}@1", "name": "first try"})
                                     for _ in range(2)))
    assert sorted(a.status_code for a in answers) == [200, 201], [a.text for a in answers]
    assert answers[0].json() == answers[1].json()
    policy = answers[0].json()
    assert policy["id"].startswith("pol_") and policy["training_step"] >= 1, policy
    assert {k: policy[k] for k in ("name", "source", "graph_id", "backend", "base_model", "deployed", "kept")} == {
        "name": "first try", "source": f"{run}@1", "graph_id": "demo", "backend": "embedded", "base_model": "embedded",
        "deployed": False, "kept": True}
    again = await alice.post("/policies", json={"from": run})  # the run alone: its latest, kept already
    assert again.status_code == 200 and again.json() == policy
    assert (await alice.get(f"/policies/{policy['id']}")).json() == policy
    assert (await alice.get(f"/policies/{run}@1")).json() == policy
    assert (await alice.get(f"/runs/{run}/policies")).json()["data"][1] == policy
    untrained = await alice.post("/policies", json={"from": f"{run}@0"})
    assert untrained.status_code == 201 and untrained.json()["training_step"] == 0 and untrained.json()["name"] is None
    listed = (await alice.get("/policies", params={"graph_id": "demo", "limit": 200})).json()["data"]
    assert policy in listed and [p["id"] for p in listed] == sorted(p["id"] for p in listed)
    first = (await alice.get("/policies", params={"graph_id": "demo", "limit": 1})).json()
    assert first["has_more"] is True and len(first["data"]) == 1
    rest = (await alice.get("/policies", params={"graph_id": "demo", "after": first["data"][0]["id"], "limit": 200})).json()["data"]
    assert [p["id"] for p in rest] == [p["id"] for p in listed if p["id"] > first["data"][0]["id"]]
    assert (await alice.get("/policies", params={"graph_id": "nope"})).json() == {"data": [], "has_more": False}
    # another tenant's policy is as unknown as an unknown one
    for client, policy_id in ((bob, policy["id"]), (alice, "pol_nope")):
        assert (await client.get(f"/policies/{policy_id}")).status_code == 404
        assert (await client.delete(f"/policies/{policy_id}")).status_code == 404
    assert policy["id"] not in [p["id"] for p in (await bob.get("/policies")).json()["data"]]
    for client, source, says in ((bob, f"{run}@1", "not found"), (alice, f"{run}@9", "not found"),
                                 (alice, "a b", "no policy id")):
        answer = await client.post("/policies", json={"from": source})
        assert answer.status_code == 422 and says in answer.text and "from" in answer.text, answer.text

    # deployed by its id, its run deleted: the run's history goes, the policy stays and still answers by id and alias
    learned = (await alice.get(f"/runs/{run}/node-scores", params={"iteration": 1, "scenario_id": "scn-saas-cfo"})).json()
    deployed = await alice.put("/graphs/demo/deployment", json={"policy": policy["id"], "require_evidence": False,
                                                                "force": True})
    assert deployed.status_code == 200 and deployed.json()["policy"] == f"{run}@1", deployed.text
    assert (await alice.delete(f"/runs/{run}")).status_code == 204
    assert (await alice.get(f"/runs/{run}")).status_code == 404
    assert (await alice.get(f"/policies/{policy['id']}")).json() == policy | {"deployed": True}
    assert (await alice.get(f"/policies/{run}@1")).json()["id"] == policy["id"]
    # it drafts, named by id, from its own copy of the checkpoint
    batch = (await alice.post("/drafts", json={"graph_id": "demo", "policy": policy["id"], "prospects": PROSPECTS})).json()
    done = await drafted(alice, batch["batch_id"])
    assert done["status"] == "succeeded" and (done["policy"], done["policy_id"]) == (f"{run}@1", policy["id"]), done
    drafts = (await alice.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    assert all(d["email"] and d["policy_id"] == policy["id"] for d in drafts)
    # its sends' outcomes are still attributed, its run gone
    ref = drafts[0]["email"]["ref"]
    reported = await alice.post("/outcomes", json={"events": [{"ref": ref, "type": "replied", "id": "kept-reply",
                                                               "occurred_at": "2026-11-20T09:30:00Z",
                                                               "recipient": "tomasz@example.org"}]})
    assert reported.json() == {"accepted": 1, "duplicates": 0, "unattributed": 0}, reported.text
    replied = (await alice.get(f"/draft-batches/{batch['batch_id']}/outcomes")).json()["data"]
    assert [o["replies"] for o in replied if o["ref"] == ref] == [1]
    # a run forks it by id, starting from its node scores
    forked = await alice.post("/learn-loop", json=BODY | {"iterations": 1, "init_from": policy["id"]})
    assert forked.status_code == 202, forked.text
    fork = forked.json()["run_id"]
    assert (await finished(alice, fork, timeout=300))["status"] == "succeeded"
    start = (await alice.get(f"/runs/{fork}/node-scores", params={"iteration": 0, "scenario_id": "scn-saas-cfo"})).json()
    assert start["scores"] == learned["scores"]
    # an evaluation takes it by id, and names it both ways
    evaluation = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [policy["id"], f"{fork}@1"]})).json()
    report = await evaluated(alice, evaluation["evaluation_id"])
    assert report["status"] == "succeeded" and report["policies"] == [f"{run}@1", f"{fork}@1"], report
    assert report["policy_ids"][0] == policy["id"] and report["policy_ids"][1].startswith("pol_")

    # deployed, it stays; once another is deployed, it goes with its sent drafts discarded, and its batch with it
    refused = await alice.delete(f"/policies/{policy['id']}", params={"discard_sends": "true"})
    assert refused.status_code == 409 and "deployed on graph 'demo'" in refused.text, refused.text
    assert (await alice.put("/graphs/demo/deployment", json={"policy": f"{fork}@1"})).status_code == 200, "ungated"
    refused = await alice.delete(f"/policies/{policy['id']}")
    assert refused.status_code == 409 and "1 drafts" in refused.text, refused.text
    assert (await alice.delete(f"/policies/{policy['id']}", params={"discard_sends": "true"})).status_code == 204
    for gone in (f"/policies/{policy['id']}", f"/policies/{run}@1", f"/draft-batches/{batch['batch_id']}"):
        assert (await alice.get(gone)).status_code == 404, gone


async def test_an_evaluation_ends_with_an_event_of_its_graph_for_its_tenant_only(world, monkeypatch):
    from app.drafts import repository

    alice, bob, run_id = world

    async def unreadable(*args, **kwargs):
        raise RuntimeError("the logged sends could not be read")

    before = (await alice.get("/graphs/demo/events", params={"limit": 1000})).json()["data"]
    theirs = (await bob.get("/graphs/demo/events", params={"limit": 1000})).json()["data"]
    monkeypatch.setattr(repository, "logged_sends", unreadable)
    created = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@1", f"{run_id}@2"]}))
    assert (await evaluated(alice, created.json()["evaluation_id"]))["status"] == "failed"
    after = (await alice.get("/graphs/demo/events", params={"limit": 1000, "after": before[-1]["seq"] if before else 0}))
    [failed] = after.json()["data"]
    assert failed["type"] == "evaluation.failed" and failed["seq"] == len(before) + 1
    assert failed["data"] == {"graph_id": "demo", "seq": failed["seq"], "evaluation": created.json()["evaluation_id"],
                              "policies": [f"{run_id}@1", f"{run_id}@2"],
                              "error": "RuntimeError: the logged sends could not be read"}
    assert (await bob.get("/graphs/demo/events", params={"limit": 1000})).json()["data"] == theirs  # Alice's alone
    assert (await bob.get("/graphs/nope/events")).status_code == 404
