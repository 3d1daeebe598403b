"""The world (app.simulation): readers who read the text by hidden traits drawn per seed, the rates and delays real
cold email shows, prospects the loop never saw, and the demo's provider delivering it all as a real one does."""

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.agent.schemas import Email
from app.knowledge_graph.service import demo_document, demo_graph
from app.outcomes import inbound, refs
from app.outcomes.providers.sendgrid import parse_sendgrid
from app.outcomes.schemas import OutcomeType
from app.outcomes.simulated import (
    LATE_ITERATIONS,
    SENDER,
    SIMULATED_STEP,
    Window,
    campaign,
    campaign_sent_at,
    window,
    world_for,
)
from app.simulation.kinds import Ask, Persuader, ReplyKind
from app.simulation.people import UNSEEN_ROLES, look_alikes, scenario_prospect, unseen_prospects
from app.simulation.rates import WorldRates
from app.simulation.readers import Market, Reader, Received, Traits

SENT_AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
DOCUMENT = json.loads(demo_document().model_dump_json())


def good_email(p) -> Received:
    """Answers the reader's pains, each with a figure and a peer in their own industry, one short ask."""
    from app.simulation.lexicon import INDUSTRY_TOOLS, INDUSTRY_WORDS
    peer = f"Harbor {INDUSTRY_WORDS[p.industry.lower()][0].title()}"
    tool = INDUSTRY_TOOLS.get(p.industry.lower(), ("snowflake",))[0]
    lines = [f"Our customer {peer}, a {INDUSTRY_WORDS[p.industry.lower()][1]} team like yours, cut {pain} by 60% "
             f"in 8 weeks, priced at $1,200 per month with the {tool} integration." for pain in p.pains]
    return Received(subject=f"{p.pains[0]} at {p.company}",
                    body=f"Hi {p.first_name},\n\n" + "\n".join(lines) + "\n\nWould a 20-minute call next week help?"
                         "\n\nAlex", sender=SENDER)


def generic_email(p) -> Received:
    return Received(subject="Quick question", body=f"Hi {p.first_name},\n\nOur industry-leading platform helps teams "
                    "unlock the value of their data with a seamless, powerful experience.\n\nWould a 20-minute call "
                    "next week help?\n\nAlex", sender=SENDER)


def people(n=40, seed=0):
    return look_alikes(DOCUMENT, seed, n // 2) + unseen_prospects(seed, n - n // 2)


# ---------------------------------------------------------------- traits


def test_traits_differ_by_market_industry_role_and_person():
    p = scenario_prospect(DOCUMENT["scenarios"][0])
    a, b = Market(0).traits(p), Market(1).traits(p)
    assert a != b and Market(0).traits(p) == a  # by seed, and repeatable
    assert Market(0).traits(p, person=1) != a  # by person
    traits = {(q.industry, q.role): Market(0).traits(q) for q in unseen_prospects(0, 200)}
    asks = {}
    for (industry, role), t in traits.items():
        asks.setdefault(role, []).append(t.ask)
    # roles answer different asks: the most common ask is not the same for every role
    assert len({max(set(v), key=v.count) for v in asks.values() if len(v) >= 5}) > 1
    # industries are persuaded by different details (averaged over their people)
    by_industry = {}
    for (industry, _), t in traits.items():
        by_industry.setdefault(industry, []).append([t.persuaders[k] for k in Persuader])
    means = np.array([np.mean(v, axis=0) for v in by_industry.values()])
    assert (means.max(axis=0) - means.min(axis=0)).max() > 0.15
    tolerances = [t.length_tolerance for t in traits.values()]
    assert min(tolerances) < 90 < max(tolerances)


# ---------------------------------------------------------------- reading


def test_a_pain_answered_with_a_concrete_detail_beats_a_generic_email_across_seeds():
    for seed in range(5):
        market = Market(seed)
        good = [market.reader(p).positive_reply_probability(good_email(p)) for p in people(seed=seed)]
        generic = [market.reader(p).positive_reply_probability(generic_email(p)) for p in people(seed=seed)]
        assert np.mean(good) > 2 * np.mean(generic)


def test_what_puts_a_reader_off_lowers_the_probability():
    for p in people(20, seed=3):
        reader = Market(3).reader(p)
        base = good_email(p)
        p_base = reader.positive_reply_probability(base)
        other = next(i for i in ("agriculture", "banking", "construction") if i != p.industry)
        from app.simulation.lexicon import INDUSTRY_WORDS
        off = Received(base.subject, base.body.replace("\n\nWould", f"\nA {INDUSTRY_WORDS[other][1]} customer saw the "
                                                                     "same results.\n\nWould"), base.sender)
        again = f"\n{p.first_name}, {p.first_name}, this is for you, {p.first_name}.\n\nWould"
        repeated = Received(base.subject, base.body.replace("\n\nWould", again), base.sender)
        two_asks = Received(base.subject, base.body.replace("help?", "help? Or could we meet on Friday instead?"),
                            base.sender)
        wrong = Received(base.subject, base.body.replace(f"Hi {p.first_name}", "Hi Bartholomew"), base.sender)
        for worse in (off, repeated, two_asks, wrong):
            assert reader.positive_reply_probability(worse) < p_base
        assert reader.positive_reply_probability(wrong) < p_base / 5


def test_the_reader_s_formula():
    """logit P(positive) = base + responsiveness + gain · relevance + ask + length + hollow + off-industry + names +
    wrong; relevance = Σ weight · (0.35 + 0.65 · persuasion). Pinned on a reader whose traits are set by hand."""
    p = unseen_prospects(0, 1)[0]
    market = Market(0)
    traits = Traits(pain_weights=(0.75, 0.25, 0.0)[:len(p.pains)] if len(p.pains) == 3 else (0.75, 0.25),
                    length_tolerance=200.0, persuaders={Persuader.NUMBER: 1.0, Persuader.PEER: 0.5,
                                                        Persuader.INTEGRATION: 0.2, Persuader.PRICE: 0.1},
                    ask=Ask.MEETING, stack=frozenset(), hollow_aversion=0.3, off_industry_aversion=0.5,
                    responsiveness=0.0, opens=0.0)
    reader = Reader(market, p, traits)
    body = (f"Hi {p.first_name},\n\nWe cut {p.pains[0]} by 40% for teams like yours.\n"
            f"We also looked at {p.pains[1]} with teams like yours, which went well for them in the end.\n\n"
            "Would a 20-minute call next week work?\n\nAlex")
    email = Received("A note", body, SENDER)
    rates = WorldRates()
    relevance = 0.75 * (0.35 + 0.65 * 1.0) + 0.25 * 0.35  # the first pain with a figure, the second named only
    logit = rates.positive_base_logit + rates.relevance_gain * relevance + 0.6
    assert reader.impression(email).relevance == pytest.approx(relevance)
    assert reader.positive_reply_probability(email) == pytest.approx(1 / (1 + math.exp(-logit)))
    assert reader.positive_reply_probability(email) == pytest.approx(0.0395, abs=5e-4)
    hollow = Received("A note", body.replace("\n\nWould", "\nIt is a seamless, industry-leading platform.\n\nWould"),
                      SENDER)
    assert reader.positive_reply_probability(hollow) == pytest.approx(1 / (1 + math.exp(-(logit - 0.3))))


# ---------------------------------------------------------------- rates


def test_rates_land_in_the_documented_bands():
    """A good email earns a positive reply a few per cent of the time (averaged over markets and people), a generic
    one well under one per cent."""
    good, generic = [], []
    for seed in range(8):
        market = Market(seed)
        for p in people(30, seed=seed):
            reader = market.reader(p)
            good.append(reader.positive_reply_probability(good_email(p)))
            generic.append(reader.positive_reply_probability(generic_email(p)))
    assert 0.02 <= np.mean(good) <= 0.08
    assert np.mean(generic) < 0.006


def _reactions(n=6000, seed=0):
    market = Market(seed)
    rng = np.random.default_rng(1)
    prospects = people(60, seed=seed)
    out = []
    for k in range(n):
        p = prospects[k % len(prospects)]
        out.append(market.reader(p, person=k).react(good_email(p), rng, SENT_AT))
    return market, out


def test_bounces_machine_opens_replies_and_their_delays():
    market, reactions = _reactions()
    bounced = np.mean([r.bounced for r in reactions])
    assert 0.01 <= market.bounce_rate <= 0.03 and abs(bounced - market.bounce_rate) < 0.01
    delivered = [r for r in reactions if not r.bounced]
    machine = sum(r.machine_open_at is not None for r in delivered)
    human = sum(r.human_open_at is not None for r in delivered)
    assert machine > 0.4 * (machine + human)  # a large share of opens
    kinds = {kind: sum(r.reply_kind == kind for r in delivered) for kind in ReplyKind}
    assert all(kinds[k] > 0 for k in ReplyKind)
    ooo = [r for r in delivered if r.reply_kind == ReplyKind.OUT_OF_OFFICE]
    assert all(r.returns_on > SENT_AT.date() and f"{r.returns_on:%d %B %Y}" in r.reply_text for r in ooo)
    delays = np.array([(r.reply_at - SENT_AT).total_seconds() / 3600 for r in delivered
                       if r.reply_kind not in (None, ReplyKind.OUT_OF_OFFICE)])
    assert np.median(delays) < 48 and np.percentile(delays, 95) > 72  # hours for most, days for some
    assert delays.mean() > np.median(delays) and delays.max() <= 24 * WorldRates().max_delay_days
    for r in delivered:
        if r.reply_kind and r.reply_kind != ReplyKind.OUT_OF_OFFICE:
            assert SENT_AT <= r.human_open_at <= r.reply_at


# ---------------------------------------------------------------- prospects


def test_unseen_prospects_come_from_industries_and_roles_no_training_scenario_has():
    scenarios = DOCUMENT["scenarios"]
    trained = {s["prospect"]["industry"].lower() for s in scenarios}, {s["prospect"]["role"] for s in scenarios}
    unseen = unseen_prospects(4, 100)
    assert unseen == unseen_prospects(4, 100) and unseen != unseen_prospects(5, 100)
    assert all(p.industry not in trained[0] and p.role not in trained[1] and p.role in UNSEEN_ROLES for p in unseen)
    assert len({p.industry for p in unseen}) >= 8 and len({p.email for p in unseen}) == 100
    trained_pains = {pain for s in scenarios for pain in s["prospect"]["pains"]}
    assert not trained_pains & {pain for p in unseen for pain in p.pains}
    assert set(unseen[0].as_draft_prospect()) == {"name", "email", "company", "role", "industry", "pains", "goal"}
    alike = look_alikes(DOCUMENT, 4, 30)
    by_id = {s["id"]: s["prospect"] for s in scenarios}
    assert all((p.role, p.industry) == (by_id[p.base]["role"], by_id[p.base]["industry"]) for p in alike)


# ---------------------------------------------------------------- the demo's provider


def test_the_provider_reports_each_window_once_and_every_reply_parses_through_the_inbound_path():
    world = world_for(demo_graph(), seed=2)
    scenario = "scn-retail-vp-engineering"
    p = world.prospects[scenario]
    email = Email(subject=good_email(p).subject, body=good_email(p).body, citations=[])
    ref = refs.email_ref("run", 0, refs.PUBLISHED)
    message_id = refs.message_id(ref, "mail.example.test")
    sent_at = campaign_sent_at(datetime(2026, 11, 28, tzinfo=UTC), iterations_total=3, iteration=0)
    whole, replies = campaign(world, scenario, email, ref, message_id, 5, sent_at, sends=2000,
                              report=Window(None, timedelta(days=30)))
    records = json.loads(whole)
    assert any(r["sg_machine_open"] for r in records if r["event"] == "open")
    assert not any(r.get("sg_machine_open") for r in records if r["event"] != "open")
    parts = [campaign(world, scenario, email, ref, message_id, 5, sent_at, 2000, window(0, now))
             for now in range(LATE_ITERATIONS + 1)]
    ids = [r["sg_event_id"] for body, _ in parts for r in json.loads(body)]
    assert sorted(ids) == sorted(r["sg_event_id"] for r in records)  # every event once, in its window
    assert sum(len(r) for _, r in parts) == len(replies) and len(parts[1][1]) > 0  # late replies come later
    assert max(r["timestamp"] for r in records) < datetime(2026, 11, 28, tzinfo=UTC).timestamp()
    parsed = parse_sendgrid(whole)
    assert {e.type for e in parsed} >= {OutcomeType.DELIVERED, OutcomeType.OPENED, OutcomeType.BOUNCED}
    kinds = set()
    for raw in replies:
        reply = inbound.parse_reply(raw, domain="mail.example.test")
        assert reply.ref == ref and reply.text.strip()
        kinds.add(reply.auto)
    assert kinds == {True, False}  # out-of-office replies are marked as auto-replies
    assert window(2, 2) == Window(None, SIMULATED_STEP) and window(0, 2).after == 2 * SIMULATED_STEP


def test_the_oracle_is_the_world_s_own_probability():
    world = world_for(demo_graph(), seed=1)
    scenario = "scn-saas-cfo"
    p = world.prospects[scenario]
    good = Email(subject=good_email(p).subject, body=good_email(p).body, citations=[])
    generic = Email(subject="Quick question", body=generic_email(p).body, citations=[])
    a, b = world.estimate(scenario, good, 0), world.estimate(scenario, generic, 0)
    assert a == world.estimate(scenario, good, 9) and a.confidence == 1.0
    assert a.p_reply > b.p_reply and a.score == pytest.approx(0.4 * a.p_open + 0.6 * a.p_reply)
    assert world.estimate(scenario, None, 0).score == 0.0
    assert world_for(demo_graph().__class__(demo_document().model_copy(update={"id": "other"})), 0) is None
