"""Drafts a salesperson would send: names as people write them, pains written into the sentence, whole subjects, the
sender, the ask, and which facts answer a prospect (its fit)."""

import re

import pytest

from app.agent.email_checks import grammar_problems, read_parts
from app.agent.facts import answers, fit, start_nodes
from app.agent.names import addressee, greeting
from app.agent.pains import short, topic
from app.agent.prompt import initial_messages, seller_summary
from app.agent.transcript import SeenNode, parse_transcript
from app.backends.embedded.composer import SUBJECT_CHARS, TONES, Seller, compose
from app.kit.settings import Settings
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores
from app.knowledge_graph.offers import offer_for, signer
from app.knowledge_graph.schemas import GraphDocument, Sender
from app.knowledge_graph.service import demo_document, demo_graph

GRAPH = demo_graph()
SELLER = Seller.of(seller_summary(GRAPH))


def seen(node_id: str) -> SeenNode:
    node = GRAPH.nodes[node_id]
    return SeenNode(node.id, node.type, node.title, 1.0, node.text, tuple(node.tags))


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name, first_name, given, formal", [
    ("Dr. Priya Nair", None, "Priya", "Dr. Nair"),
    ("Mr. John Smith", None, "John", "Mr. Smith"),
    ("Schmidt, Anna", None, "Anna", None),
    ("Ms. O'BRIEN, Siobhan", None, "Siobhan", "Ms. O'Brien"),
    ("van der Berg, Jan", None, "Jan", None),
    ("JOHN SMITH", None, "John", None),
    ("Prof. Dr. Hans-Peter Müller", None, "Hans-Peter", "Prof. Müller"),
    ("Nguyễn Thị Lan", None, "Lan", None),  # Vietnamese: family name first, the given name last
    ("Trần Văn Minh", None, "Minh", None),
    ("Minh Tran", None, "Minh", None),  # the same family name, written last
    ("Wang Xiuying", None, "Xiuying", None),  # Chinese, family name first
    ("Kim Min-jun", None, "Min-jun", None),  # Korean
    ("Min-jun Kim", None, "Min-jun", None),
    ("Nagy László", None, "László", None),  # Hungarian
    ("Kovács Éva", None, "Éva", None),
    ("Tanaka Hiroshi", None, None, None),  # Japanese: not by the given name
    ("Mr. Tanaka Hiroshi", None, None, "Mr. Tanaka"),
    ("Li Wei", None, None, None),  # either part could be the family name: no name rather than a wrong one
    ("王伟", None, None, None),
    ("J. Smith", None, None, None),
    ("Sales Team", None, None, None),
    ("Lan Nguyen", "Lan", "Lan", None),  # a given first name wins
    ("Dr. Priya Nair", "Priya", "Priya", "Dr. Nair"),
])
def test_a_name_is_read_as_people_write_it(name, first_name, given, formal):
    who = addressee(name, first_name)
    assert (who.given, who.formal) == (given, formal)


def test_a_greeting_never_greets_an_honorific_or_a_wrong_name():
    for name in ("Dr. Priya Nair", "Mr. John Smith", "Schmidt, Anna", "Li Wei", "Tanaka Hiroshi", "Sales Team"):
        for tone in TONES:
            line = greeting(tone, addressee(name))
            assert not re.search(r"\b(?:Dr|Mr|Ms|Prof)\.,", line) and ",," not in line, line
            assert "Schmidt" not in line and "Li" not in line.split() and "Tanaka" not in line, line
    assert greeting("formal", addressee("Dr. Priya Nair")) == "Dear Dr. Nair,"
    assert greeting("friendly", addressee("Dr. Priya Nair")) == "Hi Priya,"
    assert greeting("direct", addressee("Li Wei")) == "Hello," and greeting("friendly", addressee("Li Wei")) == "Hi there,"


# ---------------------------------------------------------------- pains


CRM_PAINS = [
    ("gearbox failures on turbines cost a crane hire each time", "how gearbox failures on turbines cost a crane hire each time"),
    ("price per sensor", "price per sensor"),
    ("opex not capex", "opex rather than capex"),
    ("wants to cut truck rolls", "how to cut truck rolls"),
    ("needs SAP integration", "SAP integration"),
    ("no visibility into spend by site", "the lack of visibility into spend by site"),
    ("we can't see spend by team", "not being able to see spend by team"),
    ("Technicians drive 200 km to check a sensor", "how technicians drive 200 km to check a sensor"),
    ("US data residency for our customers", "US data residency for your customers"),
    ("not enough technicians", "a shortage of technicians"),
    ("Manual vibration routes.", "manual vibration routes"),
    ("reviews take months", "how reviews take months"),
    ("cloud costs", "cloud costs"),  # a plural noun, not "how cloud costs"
    ("HIPAA audits", "HIPAA audits"),
    ("patient records scattered", "how patient records are scattered"),  # a state, not a past tense
    ("invoices duplicated across systems", "how invoices are duplicated across systems"),
    ("costs doubled", "how costs doubled"),
    ("warehouse spend growing faster than revenue", "warehouse spend growing faster than revenue"),
    ("the pump leaks", "how the pump leaks"),
]


@pytest.mark.parametrize("pain, phrase", CRM_PAINS)
def test_a_pain_as_a_crm_holds_it_reads_after_a_preposition(pain, phrase):
    assert topic(pain) == phrase


@pytest.mark.parametrize("pain", [p for p, _ in CRM_PAINS])
def test_every_pain_is_written_grammatically_in_every_tone(pain):
    prospect = {"name": "Dana Okafor", "role": "Head of Maintenance", "company": "Mekong Wind", "industry": "wind energy",
                "pains": [pain]}
    for tone in TONES:
        subject, body = compose(prospect, [seen("company-lumora")], tone, "short", "meeting", seller=SELLER)
        parts = read_parts(body)
        assert grammar_problems(parts.content) == [], body
        assert not re.search(r"\b(?:at|on|to|with|about)\s+(?:we|our)\b", body), body
        assert "dealing with" not in body and "the fact that" not in body
        assert len(subject) <= SUBJECT_CHARS and "…" not in subject and 2 <= len(subject.split()) <= 12


def test_a_subject_is_whole_within_sixty_characters():
    assert short("gearbox failures on turbines cost a crane hire each time") == "gearbox failures on turbines"
    assert short("Too many false alarms from vibration thresholds") == "too many false alarms"
    assert short("wants to cut truck rolls") is None  # no whole noun phrase: the subject names the company instead
    long_company = "Vereinigte Norddeutsche Windkraft- und Netzbetriebsgesellschaft"
    prospect = {"name": "Anna Schmidt", "role": "CFO", "company": long_company, "industry": "energy",
                "pains": ["Snowflake bill growing faster than revenue"]}
    for tone in TONES:
        subject, _ = compose(prospect, [seen("product-cost-lens")], tone, "short", "meeting", seller=SELLER)
        assert len(subject) <= SUBJECT_CHARS and "…" not in subject, subject


# ---------------------------------------------------------------- the reader first, the seller once, the sender signs


def test_the_opening_is_about_the_reader_and_the_seller_takes_one_short_sentence():
    prospect = {"name": "Priya Nair", "role": "CTO", "company": "Saint Aldric Health", "industry": "healthcare",
                "pains": ["PHI leaking into analytics tools"]}
    for tone in TONES:
        _, body = compose(prospect, [seen("case-study-meridian-health")], tone, "medium", "meeting", seller=SELLER)
        opening = read_parts(body).content
        assert "Saint Aldric Health" in opening[0] and "Lumora" not in opening[0]
        introductions = [s for s in opening if SELLER.name in s and s.startswith(("I am", "I'm", "I work"))]
        assert len(introductions) == 1 and len(introductions[0].split()) <= 16


def test_the_sender_signs_else_the_seller_s_team():
    prospect = {"name": "Priya Nair", "role": "CTO", "company": "Saint Aldric Health", "industry": "healthcare",
                "pains": ["PHI leaking into analytics tools"]}
    cited = [seen("case-study-meridian-health")]
    _, body = compose(prospect, cited, "formal", "short", "meeting", seller=SELLER,
                      sender={"name": "Sam Rivera", "title": "Account Executive"})
    assert body.endswith("Kind regards,\nSam Rivera\nAccount Executive\nLumora Systems")
    _, body = compose(prospect, cited, "direct", "short", "meeting", seller=SELLER,
                      sender={"name": "Sam Rivera", "signature": "Sam Rivera | Lumora | +1 512 555 0100"})
    assert body.endswith("Best,\nSam Rivera | Lumora | +1 512 555 0100")
    _, body = compose(prospect, cited, "friendly", "short", "meeting", seller=SELLER)
    assert body.endswith("Cheers,\nThe Lumora Systems team") and "Alex" not in body


def test_the_sender_travels_in_the_prompt_and_a_batch_or_run_overrides_the_graph_s():
    document = demo_document().model_copy(update={"sender": Sender(name="Mette Lund", title="Account Executive")})
    graph = KnowledgeGraph(document)
    scenario = next(iter(graph.scenarios.values()))
    assert parse_transcript(initial_messages(graph, scenario, NodeScores(), 6)).sender == {
        "name": "Mette Lund", "title": "Account Executive"}
    jo = Sender(name="Jo Park")
    assert parse_transcript(initial_messages(graph.signed_by(jo), scenario, NodeScores(), 6)).sender == {"name": "Jo Park"}
    settings = Settings(_env_file=None, sender_name="Robin Vale")
    assert signer(jo, graph, settings) == jo and signer(None, graph, settings) == document.sender
    assert signer(None, GRAPH, settings) == Sender(name="Robin Vale") and signer(None, GRAPH, Settings(_env_file=None)) is None


# ---------------------------------------------------------------- the ask


def test_the_ask_is_the_prospect_s_goal_else_the_graph_s_offer_for_the_role_else_generic():
    document = GraphDocument.model_validate(demo_document().model_dump() | {"offers": [
        {"roles": ["VP Engineering"], "ask": "Book a 20-minute demo of incident triage."},
        {"persona": "persona-cfo", "ask": "Book a 30-minute call to review a cost estimate."},
        {"ask": "Book a 15-minute intro call."}]})
    graph = KnowledgeGraph(document)
    assert offer_for(graph, "VP of Engineering, Platform") == "Book a 20-minute demo of incident triage."
    assert offer_for(graph, "CFO & COO") == "Book a 30-minute call to review a cost estimate."
    assert offer_for(graph, "Head of People") == "Book a 15-minute intro call."
    assert offer_for(GRAPH, "CFO") is None
    with pytest.raises(ValueError, match="persona-nope"):
        GraphDocument.model_validate(demo_document().model_dump() | {"offers": [{"persona": "persona-nope", "ask": "x"}]})
    prospect = {"name": "Dana Okafor", "role": "VP Engineering", "company": "Brightcart", "industry": "retail",
                "pains": ["alert fatigue"]}
    _, body = compose(prospect, [seen("feature-incident-triage")], "formal", "short", "meeting",
                      goal=offer_for(graph, prospect["role"]), seller=SELLER)
    assert "20-minute" in body and "triage" in body.split("\n\n")[-2]
    _, body = compose(prospect, [seen("feature-incident-triage")], "formal", "short", "meeting", goal="", seller=SELLER)
    assert "Would you be open to a 30-minute call next week to see how this applies to Brightcart?" in body


# ---------------------------------------------------------------- facts for this prospect, and fit


def test_the_facts_that_answer_the_prospect_s_pains_are_where_the_agent_starts():
    prospect = {"role": "Head of Data", "industry": "retail", "pains": ["stale inventory feeds", "Snowflake costs"],
                "custom": {"stack": "Snowflake, dbt"}}
    starts = start_nodes(GRAPH, prospect)
    assert starts[0] == "case-study-cartwell-retail"  # its own industry's case study, for its first pain
    assert "integration-snowflake" in starts or "product-cost-lens" in starts
    found = {a.node_id: a for a in answers(GRAPH, prospect)}
    assert found["case-study-cartwell-retail"].industry
    assert not any(GRAPH.nodes[n].type in ("company", "persona", "industry", "pain_point") for n in found)


@pytest.mark.parametrize("pain, integration", [("Snowflake bill growing faster than revenue", "integration-snowflake"),
                                               ("BigQuery costs doubled this year", "integration-bigquery"),
                                               ("PagerDuty pages us all night", "integration-pagerduty")])
def test_a_pain_that_names_a_tool_is_answered_by_its_integration(pain, integration):
    found = {a.node_id: a for a in answers(GRAPH, {"role": "Head of Data", "industry": "media", "pains": [pain]})}
    assert integration in found and found[integration].stack  # ranked as a tool of the prospect's stack
    assert integration in start_nodes(GRAPH, {"role": "Head of Data", "industry": "media", "pains": [pain]})
    assert "integration-snowflake" not in answers_of(GRAPH, "BigQuery costs doubled this year")


def answers_of(graph, pain: str) -> list[str]:
    return [a.node_id for a in answers(graph, {"role": "CFO", "industry": "media", "pains": [pain]})]


def test_a_prospect_no_fact_answers_is_a_low_fit_with_the_reason():
    low = fit(GRAPH, {"role": "VP Marketing", "industry": "fashion", "pains": ["low open rates", "brand awareness"]})
    assert not low.high and "low open rates" in low.reason and "brand awareness" in low.reason
    price_only = fit(GRAPH, {"role": "CFO", "industry": "mining", "pains": ["opex not capex", "haul truck downtime"]})
    assert not price_only.high and "only a price" in price_only.reason  # a price alone is no reason to write
    high = fit(GRAPH, {"role": "CTO", "industry": "healthcare", "pains": ["PHI leaking into analytics tools"]})
    assert high.high and "Meridian Health" in high.reason
    assert not fit(GRAPH, {"role": "CTO", "pains": []}).high


def test_an_email_quotes_no_fact_that_answers_none_of_the_pains():
    prospect = {"name": "Sam Lee", "role": "VP Marketing", "company": "Lotus Fashion", "industry": "fashion",
                "pains": ["low open rates on newsletters"]}
    cited = [seen("compliance-soc2"), seen("pricing-growth"), seen("case-study-northwind-bank")]
    _, body = compose(prospect, cited, "formal", "long", "meeting", seller=SELLER)
    assert "SOC 2" not in body and "Growth plan" not in body and "Northwind" not in body
