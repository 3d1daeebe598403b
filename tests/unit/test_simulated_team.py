"""The demo's simulated team: look-alike prospects of the demo scenarios (made up from a seed, names of their own) and
the simulated sending of their drafts to the world's readers, each outcome reported by its draft's ref."""

from datetime import UTC, datetime

import pytest

from app.agent.schemas import Email
from app.drafts.schemas import ProspectIn
from app.knowledge_graph.service import demo_graph
from app.outcomes.schemas import OutcomeBatch, OutcomeType
from app.outcomes.simulated_team import PARAPHRASES, SimulatedTeam
from app.simulation.kinds import POSITIVE
from app.simulation.rates import WorldRates

GRAPH = demo_graph()
SENT_AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def team() -> SimulatedTeam:
    return SimulatedTeam(GRAPH)


def drafts_for(look_alikes, greet=lambda la: la.prospect["name"].split()[0]) -> list[tuple]:
    """A plain draft per look-alike, as a batch's drafts carry them (with a ref)."""
    return [(la, {"subject": f"{greet(la)}, a question about {la.prospect['pains'][0]}",
                  "body": f"Dear {greet(la)},\n\nWould a 20-minute call next week work?\n\nBest regards,\nAlex",
                  "citations": ["company-lumora"], "ref": f"eml_test{n:04d}", "message_id": f"<eml_test{n:04d}@x.test>"})
            for n, la in enumerate(look_alikes)]


def test_look_alikes_are_the_same_for_a_seed_and_differ_between_seeds(team):
    assert team.look_alikes(60, seed=3) == team.look_alikes(60, seed=3)
    other = team.look_alikes(60, seed=4)
    assert [la.prospect["name"] for la in other] != [la.prospect["name"] for la in team.look_alikes(60, seed=3)]


def test_look_alikes_have_names_of_their_own_and_a_scenario_s_role_industry_and_pains(team):
    look_alikes = team.look_alikes(200, seed=0)
    scenarios = GRAPH.scenarios.values()
    scenario_names = {s.prospect.name for s in scenarios}
    scenario_first_names = {s.prospect.name.split()[0].lower() for s in scenarios}
    assert len({la.prospect["name"] for la in look_alikes}) == 200 and len({la.prospect["id"] for la in look_alikes}) == 200
    counts = {s.id: sum(la.scenario_id == s.id for la in look_alikes) for s in scenarios}
    assert set(counts.values()) == {20}  # as many of each scenario
    for la in look_alikes:
        prospect, base = la.prospect, GRAPH.scenarios[la.scenario_id]
        ProspectIn.model_validate(prospect)  # what POST /drafts takes
        first = prospect["name"].split()[0]
        assert prospect["name"] not in scenario_names and prospect["company"] != base.prospect.company
        assert not any(name in first.lower() or first.lower() in name for name in scenario_first_names)
        assert prospect["email"].startswith(first.lower() + ".") and prospect["email"].endswith(".example")
        assert (prospect["role"], prospect["industry"]) == (base.prospect.role, base.prospect.industry)
        assert 2 <= len(prospect["pains"]) <= 3
        assert all(p in base.prospect.pains or p in (PARAPHRASES.get(q) for q in base.prospect.pains) for p in prospect["pains"])
        assert base.prospect.name.split()[0] not in prospect["goal"]  # the goal is addressed to the look-alike
        assert la.scenario_id not in str(prospect)  # the service never learns which scenario it is modeled on
    assert any(p in PARAPHRASES.values() for la in look_alikes for p in la.prospect["pains"])


def test_the_reader_reads_the_look_alike_s_own_name(team):
    """An email that greets the look-alike reads as written to it; one that greets its scenario's prospect (written for
    someone else) loses most of its chance of a reply."""
    for look_alike in team.look_alikes(10, seed=1):
        own, scenario = look_alike.prospect["name"].split()[0], GRAPH.scenarios[look_alike.scenario_id].prospect.name.split()[0]
        email = lambda name: Email(subject="A question", body=f"Hi {name},\n\nWe cut {look_alike.prospect['pains'][0]} "  # noqa: E731
                                   "by 40% for a team like yours.\n\nWorth a call next week?\n\nAlex", citations=[])
        assert team.probabilities(look_alike, email(own))[1] > 4 * team.probabilities(look_alike, email(scenario))[1]


def test_unseen_prospects_are_a_team_of_their_own(team):
    unseen = team.unseen(20, seed=3)
    industries = {s.prospect.industry for s in GRAPH.scenarios.values()}
    assert all(la.scenario_id == "unseen" and la.prospect["industry"] not in industries for la in unseen)
    for la in unseen:
        ProspectIn.model_validate(la.prospect)


def test_sending_is_deterministic_and_every_outcome_carries_its_draft_s_ref(team):
    look_alikes = team.look_alikes(300, seed=2)
    drafts = drafts_for(look_alikes)
    sent, events = team.send(drafts, seed=7, sent_at=SENT_AT)
    assert team.send(drafts, seed=7, sent_at=SENT_AT) == (sent, events)
    assert team.send(drafts, seed=8, sent_at=SENT_AT)[1] != events
    OutcomeBatch.model_validate({"events": events[:1000]})  # what POST /outcomes takes
    assert len({e["id"] for e in events}) == len(events)
    by_ref = {d["ref"]: (la, d) for la, d in drafts}
    assert [s.ref for s in sent] == [d["ref"] for _, d in drafts]
    for s in sent:
        mine = [e for e in events if e["ref"] == s.ref]
        la, _ = by_ref[s.ref]
        assert s.prospect_id == la.prospect["id"] and all(e["recipient"] == la.prospect["email"] for e in mine)
        kinds = {(e["type"], e.get("machine", False)) for e in mine}
        assert ((OutcomeType.DELIVERED.value, False) in kinds) == s.delivered
        assert ((OutcomeType.BOUNCED.value, False) in kinds) == (not s.delivered)
        assert ((OutcomeType.OPENED.value, False) in kinds) == s.opened
        assert ((OutcomeType.REPLIED.value, False) in kinds) == s.replied
        assert (s.reply_message is not None) == (s.reply_kind is not None)
        assert not s.replied or s.opened
        assert all(datetime.fromisoformat(e["occurred_at"]) >= SENT_AT for e in mine)
    # the draws follow the world's probabilities (an out-of-office pre-empts a reply)
    expected = sum(s.true_reply for s in sent if s.delivered) * (1 - WorldRates().out_of_office_rate)
    assert abs(sum(s.reply_kind in POSITIVE for s in sent) - expected) < 4 * expected ** 0.5 + 1
