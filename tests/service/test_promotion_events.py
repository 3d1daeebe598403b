"""Every promotion and rollback of a graph's champion is an event of the graph (the tenant's deployment on it), with
what justified it: in the graph's events, its live stream and the signed webhook of the deployment's receiver, and
named by the deployment's history. A refused promotion is none, a new deployment that keeps the champion is a
`deployment.changed`; another tenant's receiver never hears one."""

import asyncio
import math
from dataclasses import dataclass

import pytest
from standardwebhooks import Webhook

from app.kit.settings import Settings
from app.main import create_app
from app.policies.evidence import verdict
from app.policies.schemas import EvaluationResult
from tests.standins import Receiver
from tests.support import FreshPostgresDatabase, connect, finished, lifespan, require_postgres, sse_until

KEYS = "alice:alice-key,bob:bob-key"
BODY = {"iterations": 2, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo", "scn-healthcare-cto"], "max_turns": 4,
        "feedback_source": "none"}
PROMOTIONS = ("policy.promoted", "policy.rolled_back")
PROSPECT = {"company": "Ledgerly", "role": "CFO", "industry": "saas", "pains": ["cloud invoices keep surprising us"]}


@dataclass
class Tenant:
    client: object
    app: object
    run_id: str
    receiver: Receiver
    secret: str | None = None  # the deployment's receiver's, once its first PUT set it


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice (a finished two-iteration run) and Bob (a one-iteration run) on the demo graph of one service, each with a
    webhook receiver of their own for their deployment on it."""
    postgres = None
    if request.param == "postgresql":
        require_postgres()
        postgres = FreshPostgresDatabase()
    url = postgres.url if postgres else f"sqlite:///{tmp_path_factory.mktemp('promotions')}/db.sqlite"
    settings = Settings(_env_file=None, database_url=url, environment="test", api_keys=KEYS, webhook_allow_private=True,
                        secret_key="test-secret-key-for-promotions", webhook_retry_schedule=[0.2, 0.5, 1, 1, 2])
    app = create_app(settings)
    receivers = [Receiver(), Receiver()]
    try:
        async with lifespan(app), connect(app) as alice, connect(app) as bob:
            tenants = {}
            for name, client, receiver, iterations in (("alice", alice, receivers[0], 2), ("bob", bob, receivers[1], 1)):
                client.headers["Authorization"] = f"Bearer {name}-key"
                created = (await client.post("/learn-loop", json=BODY | {"iterations": iterations})).json()
                tenants[name] = Tenant(client, app, created["run_id"], receiver)
            for tenant in tenants.values():
                assert (await finished(tenant.client, tenant.run_id, timeout=300))["status"] == "succeeded"
            yield tenants["alice"], tenants["bob"]
    finally:
        for receiver in receivers:
            receiver.close()
        if postgres:
            postgres.drop()


async def graph_events(tenant: Tenant) -> list[dict]:
    return (await tenant.client.get("/graphs/demo/events", params={"limit": 1000})).json()["data"]


async def promotions(tenant: Tenant) -> list[dict]:
    return [e for e in await graph_events(tenant) if e["type"] in PROMOTIONS]


async def heard(tenant: Tenant, events: list[dict]) -> dict[str, dict]:
    """The webhooks of these events, once the receiver has them, each verified with the deployment receiver's secret,
    by event id."""
    wanted = {e["id"] for e in events}
    while not wanted <= {r["headers"]["webhook-id"] for r in tenant.receiver.delivered()}:
        await asyncio.sleep(0.05)
    verifier = Webhook(tenant.secret)
    return {r["headers"]["webhook-id"]: verifier.verify(r["body"], r["headers"]) for r in tenant.receiver.delivered()
            if r["headers"]["webhook-id"] in wanted}


async def put(tenant: Tenant, body: dict) -> dict:
    """The tenant's first PUT names its receiver; the later ones keep it."""
    first = tenant.secret is None
    answer = await tenant.client.put("/graphs/demo/deployment", json=body | ({"webhook_url": tenant.receiver.url}
                                                                             if first else {}))
    assert answer.status_code == 200, answer.text
    if first:
        tenant.secret = answer.json()["webhook_secret"]
        assert tenant.secret.startswith("whsec_")
    else:
        assert answer.json()["webhook_secret"] is None  # shown once
    return answer.json()


async def settled(client, path: str) -> dict:
    while (found := (await client.get(path)).json())["status"] not in ("succeeded", "failed"):
        await asyncio.sleep(0.1)
    return found


async def test_a_plain_promotion_and_a_rollback_are_events_the_history_names(world):
    alice, _ = world
    first, second = f"{alice.run_id}@1", f"{alice.run_id}@2"
    await put(alice, {"policy": first})
    await put(alice, {"policy": second})
    same_champion = await put(alice, {"policy": second, "challengers": [{"policy": first, "share": 0.2}]})
    changed = [e for e in await graph_events(alice) if e["id"] == same_champion["history"][0]["event"]]
    assert [e["type"] for e in changed] == ["deployment.changed"]  # only its challengers changed: no promotion
    assert changed[0]["data"] | {"seq": None, "deployed_at": None} == {
        "graph_id": "demo", "seq": None, "policy": second, "challengers": [{"policy": first, "share": 0.2}],
        "traffic": "fixed", "require_evidence": False, "sequential": False, "auto_promote": False, "deployed_at": None}
    rolled_back = await put(alice, {"policy": first})

    events = await promotions(alice)
    assert [(e["type"], e["data"]["policy"], e["data"]["replaced"]) for e in events] == [
        ("policy.promoted", first, None), ("policy.promoted", second, first), ("policy.rolled_back", first, second)]
    for event in events:
        assert event["data"] | {"policy": None, "replaced": None, "deployed_at": None, "seq": None} == {
            "seq": None, "graph_id": "demo", "policy": None, "replaced": None, "trigger": "request",
            "gated": False, "forced": False, "evaluation": None, "evidence": None, "deployed_at": None}
    assert [e["seq"] for e in await graph_events(alice)] == [1, 2, 3, 4]  # the graph's own seq
    # the history names each promotion, newest first, with the same moment and kind
    announced = [h for h in rolled_back["history"] if h["event"] in {e["id"] for e in events}]
    assert [h["event"] for h in announced] == [e["id"] for e in reversed(events)]
    assert [h["rollback"] for h in announced] == [True, False, False]
    for record, event in zip(announced, reversed(events), strict=True):
        assert record["deployed_at"] == event["data"]["deployed_at"] and record["trigger"] == "request"

    by_id = await heard(alice, events)
    for event in events:
        assert by_id[event["id"]]["type"] == event["type"] and by_id[event["id"]]["data"] == event["data"]

    # the graph's live stream gives them, each as the list shows it; resumed after one, the next ones
    streamed = await sse_until(alice.app, "/graphs/demo/events", {"Authorization": "Bearer alice-key"}, 4)
    assert [(e[0], e[1], e[2]) for e in streamed] == [(str(e["seq"]), e["type"], e["data"])
                                                      for e in await graph_events(alice)]
    resumed = await sse_until(alice.app, "/graphs/demo/events", {"Authorization": "Bearer alice-key",
                                                                 "Last-Event-ID": "2"}, 2)
    assert [e[0] for e in resumed] == ["3", "4"]
    # the run's own events are the run's only
    run_events = (await alice.client.get(f"/runs/{alice.run_id}/events", params={"limit": 1000})).json()["data"]
    assert run_events[-1]["type"] == "run.succeeded" and not {e["type"] for e in run_events} & set(PROMOTIONS)


async def test_a_gated_promotion_is_an_event_only_with_its_evidence_or_forced(world):
    alice, _ = world
    untrained, champion = f"{alice.run_id}@0", f"{alice.run_id}@1"
    await put(alice, {"policy": champion, "challengers": [{"policy": untrained, "share": 0.3}], "require_evidence": True})
    before = await promotions(alice)
    refused = await alice.client.put("/graphs/demo/deployment", json={"policy": untrained})
    assert refused.status_code == 409
    lifted = await alice.client.put("/graphs/demo/deployment", json={"policy": untrained, "require_evidence": False})
    assert lifted.status_code == 409 and "requires evidence" in lifted.text  # the gate in force judges the PUT lifting it
    assert await promotions(alice) == before  # refused (or a new deployment keeping the champion): no event

    prospects = [PROSPECT | {"id": f"g{n}", "name": f"Prospect {n}"} for n in range(40)]
    batch = (await alice.client.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": 5})).json()
    assert (await settled(alice.client, f"/draft-batches/{batch['batch_id']}"))["status"] == "succeeded"
    drafts = (await alice.client.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    outcomes = []
    for draft in drafts:  # every draft of the challenger got a reply, none of the champion's
        ref, who = draft["email"]["ref"], draft["prospect"]["id"] + "@example.org"
        outcomes.append({"ref": ref, "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z", "id": f"d-{ref}",
                         "recipient": who})
        if draft["policy"] == untrained:
            outcomes.append({"ref": ref, "type": "replied", "occurred_at": "2026-11-01T12:00:00Z", "id": f"r-{ref}",
                             "recipient": who, "category": "interested"})
    assert (await alice.client.post("/outcomes", json={"events": outcomes})).json()["unattributed"] == 0
    created = (await alice.client.post("/evaluations", json={"graph_id": "demo", "policies": [untrained, champion]})).json()
    evaluation = await settled(alice.client, f"/evaluations/{created['evaluation_id']}")
    estimates = {p["policy"]: p["off_policy"]["dr"] or p["off_policy"]["snips"] for p in evaluation["result"]["policies"]}

    await put(alice, {"policy": untrained})
    await put(alice, {"policy": champion, "force": True})
    promoted, forced = (await promotions(alice))[len(before):]
    assert promoted["type"] == "policy.promoted" and promoted["data"]["evaluation"] == created["evaluation_id"]
    assert (promoted["data"]["replaced"], promoted["data"]["gated"], promoted["data"]["forced"]) == (champion, True, False)
    assert promoted["data"]["evidence"]["ahead"] is True and promoted["data"]["evidence"]["estimator"] in ("DR", "SNIPS")
    assert promoted["data"]["evidence"]["sequential"] is False  # the fixed-sample interval, the default
    assert (promoted["data"]["evidence"]["policy"], promoted["data"]["evidence"]["replaced"]) == (
        estimates[untrained], estimates[champion])
    assert promoted["data"]["evidence"]["policy"]["low"] > promoted["data"]["evidence"]["replaced"]["high"]
    # forced back against that evidence: a rollback that says so, and what the evidence showed
    assert forced["type"] == "policy.rolled_back" and forced["data"]["forced"] is True
    assert forced["data"]["evaluation"] == created["evaluation_id"] and forced["data"]["evidence"]["ahead"] is False
    assert forced["data"]["evidence"]["policy"] == estimates[champion]
    history = (await alice.client.get("/graphs/demo/deployment")).json()["history"]
    assert [(h["event"], h["forced"], h["evaluation"]) for h in history[:2]] == [
        (forced["id"], True, created["evaluation_id"]), (promoted["id"], False, created["evaluation_id"])]
    by_id = await heard(alice, [promoted, forced])
    assert by_id[promoted["id"]]["data"] == promoted["data"] and by_id[forced["id"]]["data"] == forced["data"]


async def test_an_auto_promotion_is_an_event_that_says_so(world):
    alice, _ = world
    untrained, champion = f"{alice.run_id}@0", f"{alice.run_id}@1"
    before = await promotions(alice)
    await put(alice, {"policy": champion, "challengers": [{"policy": untrained, "share": 0.3}], "auto_promote": True,
                      "sequential": True})
    created = (await alice.client.post("/evaluations", json={"graph_id": "demo", "policies": [untrained, champion]})).json()
    assert (await settled(alice.client, f"/evaluations/{created['evaluation_id']}"))["status"] == "succeeded"
    [auto] = (await promotions(alice))[len(before):]
    assert auto["type"] == "policy.rolled_back"  # it had been champion in the test before
    assert auto["data"] | {"evidence": None, "deployed_at": None, "seq": None} == {
        "seq": None, "graph_id": "demo", "policy": untrained, "replaced": champion,
        "trigger": "auto_promote", "gated": True, "forced": False, "evaluation": created["evaluation_id"], "evidence": None,
        "deployed_at": None}
    assert auto["data"]["evidence"]["ahead"] is True and auto["data"]["evidence"]["sequential"] is True
    listed = await graph_events(alice)
    evaluated = listed[[e["id"] for e in listed].index(auto["id"]) - 1]  # the evaluation's event, then the promotion
    assert (evaluated["type"], evaluated["data"]["evaluation"]) == ("evaluation.succeeded", created["evaluation_id"])
    assert evaluated["data"]["policies"] == [untrained, champion]
    assert (await heard(alice, [evaluated]))[evaluated["id"]]["data"] == evaluated["data"]
    now = (await alice.client.get("/graphs/demo/deployment")).json()
    assert now["sequential"] is True  # an auto-promotion keeps how the deployment reads its evidence
    assert now["history"][0] | {"challengers": None} == {
        "policy": untrained, "challengers": None, "deployed_at": auto["data"]["deployed_at"], "forced": False,
        "evaluation": created["evaluation_id"], "trigger": "auto_promote", "rollback": True, "event": auto["id"]}
    assert (await heard(alice, [auto]))[auto["id"]]["data"] == auto["data"]


async def test_another_tenants_receiver_never_hears_a_promotion(world):
    alice, bob = world
    await put(bob, {"policy": f"{bob.run_id}@1"})
    [his] = await promotions(bob)
    assert his["data"]["policy"] == f"{bob.run_id}@1" and his["data"]["replaced"] is None  # Alice's champion is hers
    await heard(bob, [his])
    alices = await promotions(alice)
    await heard(alice, alices)
    assert {r["headers"]["webhook-id"] for r in bob.receiver.requests}.isdisjoint(e["id"] for e in alices)
    assert {Webhook(bob.secret).verify(r["body"], r["headers"])["data"]["policy"].split("@")[0]
            for r in bob.receiver.delivered()} == {bob.run_id}
    assert his["id"] not in {r["headers"]["webhook-id"] for r in alice.receiver.requests}
    assert his["id"] not in {e["id"] for e in await graph_events(alice)}  # one shared graph, a list per tenant
    assert (await bob.client.get(f"/runs/{alice.run_id}/events")).status_code == 404


async def test_a_sequential_gate_judges_the_put_that_loosens_it(world):
    """Evidence that the fixed-sample interval would take and the always-valid one would not: the deployment reading
    the always-valid one refuses the PUT asking to read the other; a PUT keeping the champion loosens it for the next."""
    _, bob = world
    champion, challenger = f"{bob.run_id}@1", f"{bob.run_id}@0"
    await put(bob, {"policy": champion, "challengers": [{"policy": challenger, "share": 0.5}], "require_evidence": True,
                    "sequential": True})
    # the challenger's drafts at every third position got a reply
    evaluation = await _evaluated(bob, "s", 11, lambda n, draft: draft["policy"] == challenger and n % 3 == 0,
                                  [challenger, champion])
    result = EvaluationResult.model_validate(evaluation["result"])
    assert verdict(result, challenger, champion, min_recipients=5, guardrail=0.005).ahead  # the case: the fixed-sample interval clears zero …
    assert not verdict(result, challenger, champion, min_recipients=5, guardrail=0.005, sequential=True).ahead  # … the always-valid one does not

    loosening = await bob.client.put("/graphs/demo/deployment", json={"policy": challenger, "sequential": False})
    assert loosening.status_code == 409 and "(always-valid)" in loosening.text
    lifting = await bob.client.put("/graphs/demo/deployment", json={
        "policy": challenger, "sequential": False, "require_evidence": False})
    assert lifting.status_code == 409 and "(always-valid)" in lifting.text
    loosened = await put(bob, {"policy": champion, "challengers": [{"policy": challenger, "share": 0.5}],
                               "sequential": False})
    assert (loosened["require_evidence"], loosened["sequential"]) == (True, False)
    promoted = await put(bob, {"policy": challenger})
    assert promoted["policy"] == challenger and promoted["history"][0]["evaluation"] == evaluation["evaluation_id"]


async def test_a_deployments_receiver_is_kept_replaced_or_removed_by_a_put(world):
    _, bob = world
    champion = (await bob.client.get("/graphs/demo/deployment")).json()["policy"]
    same = (await bob.client.put("/graphs/demo/deployment", json={"policy": champion,
                                                                  "webhook_url": bob.receiver.url})).json()
    assert same["webhook_secret"] is None and same["webhook_url"] == bob.receiver.url  # the same URL keeps its secret
    replaced = (await bob.client.put("/graphs/demo/deployment", json={"policy": champion,
                                                                      "webhook_url": bob.receiver.url + "?token=t"})).json()
    assert replaced["webhook_secret"].startswith("whsec_") and replaced["webhook_secret"] != bob.secret
    assert replaced["webhook_url"] == bob.receiver.url + "?***"  # the token is never shown again
    [announced] = [e for e in await graph_events(bob) if e["id"] == replaced["history"][0]["event"]]
    assert Webhook(replaced["webhook_secret"]).verify(*[(r["body"], r["headers"]) for r in (await _heard_raw(
        bob, announced["id"]))][0])["type"] == "deployment.changed"
    removed = (await bob.client.put("/graphs/demo/deployment", json={"policy": champion, "webhook_url": None})).json()
    assert removed["webhook_url"] is None and removed["history"][0]["event"] is not None  # still an event, unheard
    await asyncio.sleep(1)
    assert removed["history"][0]["event"] not in {r["headers"]["webhook-id"] for r in bob.receiver.requests}
    unsafe = await bob.client.put("/graphs/demo/deployment", json={"policy": champion, "webhook_url": "ftp://x/hook"})
    assert unsafe.status_code == 422 and "webhook_url" in unsafe.text


async def test_a_refused_promotion_says_how_many_sends_a_decision_needs_at_the_observed_rates(world):
    """The figure is the sample size of two proportions at the evaluation's estimates, computed here by hand: n =
    (1.644854 · √(2p̄(1 − p̄)) + 0.841621 · √(p1(1 − p1) + p2(1 − p2)))² / (p1 − p2)² sends of each, 80 % power for the
    gate's one-sided 5 % test."""
    _, bob = world
    policies = [f"{bob.run_id}@0", f"{bob.run_id}@1"]
    champion = (await bob.client.get("/graphs/demo/deployment")).json()["policy"] or policies[0]
    [challenger] = [p for p in policies if p != champion]
    await put(bob, {"policy": champion, "challengers": [{"policy": challenger, "share": 0.5}], "require_evidence": True,
                    "sequential": False})
    # the champion's drafts at every other position got a reply, none of the challenger's
    evaluation = await _evaluated(bob, "n", 17, lambda n, draft: draft["policy"] == champion and n % 2 == 0,
                                  [challenger, champion])
    found = {p["policy"]: p["off_policy"] for p in evaluation["result"]["policies"]}
    p1, p2 = ((found[p]["dr"] or found[p]["snips"])["value"] for p in (challenger, champion))
    mean = (p1 + p2) / 2
    needed = math.ceil(((1.644854 * math.sqrt(2 * mean * (1 - mean))
                         + 0.841621 * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) / (p1 - p2)) ** 2)

    refused = await bob.client.put("/graphs/demo/deployment", json={"policy": challenger})
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert f"at the observed rates ({p1:.3f} against {p2:.3f}) a decision needs about {needed:,} sends of each" in detail
    assert (f"the evaluation has {found[challenger]['matched']:,} of the challenger's and "
            f"{found[champion]['matched']:,} of the champion's") in detail


async def _evaluated(tenant: Tenant, id_prefix: str, seed: int, replied, policies: list[str]) -> dict:
    """60 prospects drafted by the deployment, each delivered, those `replied(position, draft)` names replied to
    (interested); then the finished evaluation of `policies`."""
    prospects = [PROSPECT | {"id": f"{id_prefix}{n}", "name": f"Prospect {n}"} for n in range(60)]
    batch = (await tenant.client.post("/drafts", json={"graph_id": "demo", "prospects": prospects, "seed": seed})).json()
    assert (await settled(tenant.client, f"/draft-batches/{batch['batch_id']}"))["status"] == "succeeded"
    drafts = (await tenant.client.get(f"/draft-batches/{batch['batch_id']}/drafts")).json()["data"]
    outcomes = []
    for n, draft in enumerate(drafts):
        ref, who = draft["email"]["ref"], draft["prospect"]["id"] + "@example.org"
        outcomes.append({"ref": ref, "type": "delivered", "occurred_at": "2026-11-01T09:00:00Z", "id": f"d-{ref}",
                         "recipient": who})
        if replied(n, draft):
            outcomes.append({"ref": ref, "type": "replied", "occurred_at": "2026-11-01T12:00:00Z", "id": f"r-{ref}",
                             "recipient": who, "category": "interested"})
    assert (await tenant.client.post("/outcomes", json={"events": outcomes})).json()["unattributed"] == 0
    created = (await tenant.client.post("/evaluations", json={"graph_id": "demo", "policies": policies})).json()
    return await settled(tenant.client, f"/evaluations/{created['evaluation_id']}")


async def _heard_raw(tenant: Tenant, event_id: str) -> list[dict]:
    while event_id not in {r["headers"]["webhook-id"] for r in tenant.receiver.delivered()}:
        await asyncio.sleep(0.05)
    return [r for r in tenant.receiver.delivered() if r["headers"]["webhook-id"] == event_id]
