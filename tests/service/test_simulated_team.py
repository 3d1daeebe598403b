"""The demo's simulated team end to end, on SQLite: its look-alikes drafted by a deployed policy, the drafts sent, and
every outcome attributed to its draft through `POST /outcomes` and listed per prospect; and the same sends reported
as the provider reports them (a signed SendGrid Event Webhook, replies as RFC 822) through the providers' endpoints."""

import asyncio
from datetime import UTC, datetime, timedelta

from app.kit.settings import Settings
from app.knowledge_graph.service import demo_graph
from app.main import create_app
from app.outcomes.simulated import SimulatedSendGrid
from app.outcomes.simulated_team import SimulatedTeam
from tests.support import connect, finished, lifespan

SCENARIOS = ["scn-saas-cfo", "scn-healthcare-cto"]


async def test_a_batch_of_look_alikes_is_drafted_sent_and_its_outcomes_attributed(tmp_path):
    team = SimulatedTeam(demo_graph())
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        secret_key="test-secret-key-for-the-team", message_id_domain="mail.example.test")
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        run_id = (await client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "max_turns": 4,
                                                         "scenario_ids": SCENARIOS, "feedback_source": "none"})).json()["run_id"]
        assert (await finished(client, run_id, timeout=300))["status"] == "succeeded"
        assert (await client.put("/graphs/demo/deployment", json={"policy": run_id})).status_code == 200
        look_alikes = team.look_alikes(8, seed=5, scenario_ids=SCENARIOS)
        created = (await client.post("/drafts", json={"graph_id": "demo", "prospects": [la.prospect for la in look_alikes]})).json()
        for _ in range(600):
            batch = (await client.get(f"/draft-batches/{created['batch_id']}")).json()
            if batch["status"] in ("succeeded", "failed"):
                break
            await asyncio.sleep(0.1)
        assert batch["status"] == "succeeded", batch
        drafts = (await client.get(f"/draft-batches/{created['batch_id']}/drafts")).json()["data"]
        assert [d["prospect"]["id"] for d in drafts] == [la.prospect["id"] for la in look_alikes]
        assert [d["like"] for d in drafts] == [la.scenario_id for la in look_alikes]
        for la, draft in zip(look_alikes, drafts, strict=True):
            assert la.prospect["name"].split()[0] in draft["email"]["body"]  # the look-alike, not its scenario's prospect

        sent_at = datetime.now(UTC) - timedelta(days=11)  # every reaction has happened (the latest comes 10 days on)
        sent, events = team.send([(la, d["email"]) for la, d in zip(look_alikes, drafts, strict=True)], seed=1, sent_at=sent_at)
        answer = (await client.post("/outcomes", json={"events": events})).json()
        assert answer == {"accepted": len(events), "duplicates": 0, "unattributed": 0}
        again = (await client.post("/outcomes", json={"events": team.send(
            [(la, d["email"]) for la, d in zip(look_alikes, drafts, strict=True)], seed=1, sent_at=sent_at)[1]})).json()
        assert again == {"accepted": 0, "duplicates": len(events), "unattributed": 0}  # the same sends, the same events
        listed = {o["ref"]: o for o in (await client.get(f"/draft-batches/{created['batch_id']}/outcomes")).json()["data"]}
        for s in sent:
            o = listed[s.ref]
            assert o["prospect_id"] == s.prospect_id
            assert (o["delivered"], o["bounces"], o["opens"], o["replies"]) == (int(s.delivered), int(not s.delivered),
                                                                               int(s.opened), int(s.replied))


async def test_the_team_s_sends_come_back_through_the_providers_endpoints_signed_and_as_mime(tmp_path):
    team = SimulatedTeam(demo_graph(), market_seed=3)
    provider = SimulatedSendGrid()
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        secret_key="test-secret-key-for-the-team", message_id_domain="mail.example.test")
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        run_id = (await client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "max_turns": 4,
                                                         "scenario_ids": SCENARIOS, "feedback_source": "none"})).json()["run_id"]
        assert (await finished(client, run_id, timeout=300))["status"] == "succeeded"
        email = (await client.get(f"/runs/{run_id}/iterations/1")).json()["email"]
        source = (await client.post("/outcome-sources", json={"provider": "sendgrid",
                                                               "verification_key": provider.verification_key})).json()
        # one published email sent to 400 look-alikes (the same ref: one email, many recipients)
        look_alikes = team.look_alikes(400, seed=2, scenario_ids=SCENARIOS)
        sent_at = datetime.now(UTC) - timedelta(days=11)
        sent, _ = team.send([(la, email) for la in look_alikes], seed=4, sent_at=sent_at)
        early, _ = team.as_provider(sent, through=sent_at + timedelta(hours=1))
        body, replies = team.as_provider(sent, through=datetime.now(UTC))
        assert len(early) < len(body)  # reactions come over time
        now = int(datetime.now(UTC).timestamp())
        forged = await client.post(f"/outcomes/hooks/{source['id']}", content=body,
                                   headers=SimulatedSendGrid().signed(body, now))
        assert forged.status_code == 401
        answer = await client.post(f"/outcomes/hooks/{source['id']}", content=body, headers=provider.signed(body, now))
        assert answer.status_code == 200 and answer.json()["unattributed"] == 0, answer.text
        for raw in replies:
            got = await client.post(f"/outcomes/hooks/{source['id']}/inbound", content=raw,
                                    headers={"Content-Type": "message/rfc822"})
            assert got.status_code == 200 and got.json()["unattributed"] == 0, got.text
        [tally] = [o for o in (await client.get(f"/runs/{run_id}/outcomes")).json()["data"] if o["ref"] == email["ref"]]
        assert tally["delivered"] == sum(s.delivered for s in sent) and tally["bounces"] == sum(not s.delivered for s in sent)
        assert tally["machine_opens"] == sum(s.reaction.machine_open_at is not None for s in sent if s.delivered)
        assert tally["opens"] == sum(s.opened for s in sent)
        assert tally["replies"] == sum(s.replied for s in sent)  # an out-of-office is no reply
