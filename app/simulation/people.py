"""Simulated prospects: what a sales tool would export about a person, and the hidden base they were drawn from.

Names are first and last names combined at random and companies are invented words: no real person or company.
Two kinds: look-alikes of a graph's training scenarios (same role and industry, some of the same pains, some in other
words), and prospects from industries and roles that no training scenario of the demo graph has, whose pains are
written in their own words.
"""

import re
from dataclasses import dataclass

import numpy as np

# Four letters or more, and none part of a common word ("Ana" is in "analytics"), so a reader finds a name by its
# letters. None is a name of the demo's scenarios.
FIRST_NAMES = (
    "Abena", "Akira", "Aurelio", "Beatriz", "Bogdan", "Camille", "Cyrus", "Dagny", "Desmond", "Emeka", "Esther",
    "Farida", "Fenella", "Gustavo", "Hamish", "Ingrid", "Isidro", "Jarrah", "Joaquim", "Katya", "Keziah", "Leopold",
    "Lucinda", "Magnus", "Marisol", "Niamh", "Nikolai", "Oksana", "Osvaldo", "Petra", "Quentin", "Radhika", "Philippa",
    "Soren", "Svetlana", "Tamsin", "Thaddeus", "Ulrike", "Valentin", "Wilhelmina", "Xiomara", "Yusuf", "Zofia",
)
LAST_NAMES = (
    "Abernathy", "Bakshi", "Castellanos", "Dvorak", "Eriksen", "Fairbairn", "Gallagher", "Haddad", "Ishikawa",
    "Jankowski", "Kowalczyk", "Lachance", "Moreau", "Nakashima", "Oyelaran", "Pellegrini", "Quintero", "Rautio",
    "Szabo", "Thorsen", "Umarov", "Vasquez", "Wojcik", "Xenakis", "Yilmaz", "Zeller",
)
COMPANY_WORDS = (
    "Alderbrook", "Brackwater", "Corvantis", "Dunmere", "Elmstone", "Fallowmark", "Greyhollow", "Harrowgate",
    "Ironvale", "Juniperfield", "Kestavo", "Larchmont", "Marrowind", "Northwick", "Oakhurst", "Pellucid", "Quarrystone",
    "Rivenhall",
    "Stonebridge", "Thistledown", "Umberline", "Veldtmark", "Westerly", "Yarrowby", "Zephyrine",
)
COMPANY_KINDS = {
    "healthcare": ("Health", "Medical Group", "Clinics"),
    "banking": ("Bank", "Savings Bank", "Trust"),
    "retail": ("Market", "Goods", "Stores"),
    "saas": ("Labs", "Cloud", "Software"),
    "manufacturing": ("Components", "Works", "Industries"),
    "logistics": ("Freight", "Logistics", "Haulage"),
    "insurance": ("Mutual", "Assurance", "Insurance"),
    "fintech": ("Pay", "Finance", "Payments"),
    "public sector": ("County Department of Revenue", "City Finance Office", "Regional Tax Authority"),
    "hospitality": ("Hotels", "Resorts", "Hospitality Group"),
    "higher education": ("University", "College", "Institute of Technology"),
    "energy utilities": ("Power", "Energy", "Utilities"),
    "telecommunications": ("Telecom", "Networks", "Broadband"),
    "pharmaceuticals": ("Therapeutics", "Pharma", "Biosciences"),
    "media publishing": ("Media", "Press", "Publishing"),
    "agriculture": ("Growers", "Farms", "Agri Cooperative"),
    "legal services": ("LLP", "Law Partners", "Legal"),
    "construction": ("Builders", "Construction", "Contracting"),
}

# The demo's pains in other words: a team's CRM rarely words a pain as the training scenario did.
PARAPHRASES = {
    "PHI leaking into analytics tools": "patient data (PHI) showing up in analytics tools",
    "broken clinical dashboards": "clinical dashboards that keep breaking",
    "HIPAA audit pressure": "pressure from HIPAA audits",
    "slow audit preparation": "audit preparation takes weeks",
    "SOX control evidence scattered across teams": "SOX evidence spread over many teams",
    "regulators asking for data lineage": "regulators want to see data lineage",
    "stale inventory data": "inventory data that is out of date",
    "slow incident response": "incidents take too long to resolve",
    "alert fatigue on the on-call rotation": "on-call engineers drowning in alerts",
    "Snowflake bill growing faster than revenue": "warehouse spend outpacing revenue",
    "no cost attribution by team": "cannot attribute cloud cost to teams",
    "unpredictable month-end cloud invoices": "cloud invoices that surprise us at month-end",
    "sensor data gaps": "gaps in sensor data",
    "unplanned downtime on production lines": "production lines stopping without warning",
    "manual shift reporting": "shift reports still done by hand",
    "overnight pipeline failures": "pipelines failing overnight",
    "too many noisy Airflow alerts": "noisy Airflow alerting",
    "late ETA updates to customers": "customers get ETA updates late",
    "vendor security reviews take months": "months-long vendor security reviews",
    "access control sprawl": "sprawling access controls",
    "PII exposure in claims data": "PII exposed in claims data",
    "settlement reconciliation errors": "errors reconciling settlements",
    "keeping PCI DSS scope small": "PCI DSS scope creeping",
    "incident response not scaling with volume": "incident response cannot keep up with volume",
    "thousands of staff hours spent on manual reporting": "staff spending thousands of hours on manual reports",
    "procurement and security approval hurdles": "slow procurement and security approvals",
    "legacy on-prem systems": "legacy on-premises systems",
    "GDPR data residency questions from EU customers": "EU customers asking where their data resides (GDPR)",
    "schema changes breaking customer dashboards": "schema changes that break customer dashboards",
    "alert fatigue": "too many alerts",
}
PARAPHRASE_SHARE = 0.5  # of a look-alike's pains, in other words

# Industries no training scenario of the demo graph has, each with pains as its people say them.
UNSEEN_PAINS: dict[str, tuple[str, ...]] = {
    "hospitality": (
        "booking data reaching the revenue team a day late", "guest PII copied into marketing tools",
        "occupancy dashboards that break after every PMS update", "cloud data bill doubled since we added properties",
        "night audit reports still built by hand"),
    "higher education": (
        "enrollment numbers that disagree between systems", "student records ending up in shared spreadsheets",
        "nightly SIS loads failing before census day", "state reporting takes the registrar weeks",
        "no idea which department drives our warehouse spend"),
    "energy utilities": (
        "smart meter reads missing for whole feeders", "outage reports assembled manually for the regulator",
        "SCADA data gaps nobody notices until billing", "on-call staff paged for every late meter batch",
        "legacy on-prem historian we cannot retire"),
    "telecommunications": (
        "subscriber usage feeds arriving late for billing", "churn dashboards that go stale during outages",
        "thousands of network alerts a night, most of them noise", "customer data spread across legacy BSS systems",
        "cloud analytics spend nobody can attribute"),
    "pharmaceuticals": (
        "GxP audit evidence gathered by hand before every inspection", "clinical trial data pipelines failing silently",
        "FDA asks for lineage we cannot show", "patient data from trials reaching analysts unmasked",
        "batch record reports rebuilt manually every week"),
    "media publishing": (
        "audience dashboards stale on the morning after a big story", "ad revenue numbers that never reconcile",
        "subscriber data copied into too many tools", "paywall events dropped by a flaky pipeline",
        "warehouse bill climbing with every new title"),
    "agriculture": (
        "yield data from field sensors with gaps at harvest", "grower payments reconciled in spreadsheets",
        "cooperative reports built by hand each season", "equipment telemetry that stops without anyone noticing",
        "traceability records auditors keep asking for"),
    "legal services": (
        "billable hours data that disagrees with the finance system", "client confidential data in analytics tools",
        "matter reports compiled by paralegals every month", "security questionnaires from every new client",
        "access to matter data that nobody has reviewed in years"),
    "construction": (
        "job cost reports a month behind the sites", "subcontractor invoices reconciled by hand",
        "equipment sensor data with gaps on remote sites", "project dashboards that break when schedules change",
        "safety reporting assembled manually for each client"),
}
# Roles no training scenario of the demo graph has (those are CTO, CFO, COO, CIO, CISO, VP Engineering, Head of
# Compliance, Data Platform Lead).
UNSEEN_ROLES = (
    "Director of Data Engineering", "Head of Analytics", "IT Operations Manager", "Finance Director",
    "Chief Data Officer", "Privacy Officer", "Director of Revenue Operations", "Head of Platform Engineering",
    "Controller", "Operations Director",
)
GOALS = (
    "Book a 20-minute call about {pain}.",
    "Get {first} to try a free sandbox on their own data about {pain}.",
    "Get {first} to ask for the case study on {pain}.",
    "Get {first} to reply whether {pain} is a priority this quarter.",
)


@dataclass(frozen=True)
class SimulatedProspect:
    """What a sales tool would export about a person, plus the hidden base it was drawn from (the world's alone)."""

    email: str
    first_name: str
    last_name: str
    company: str
    role: str
    industry: str
    pains: tuple[str, ...]
    goal: str
    base: str  # the training scenario it looks like, or "unseen"; never sent to the service

    @property
    def name(self) -> str:
        return f"{self.first_name} {self.last_name}"

    def as_draft_prospect(self) -> dict:
        """The prospect as `POST /drafts` takes it."""
        return {"name": self.name, "email": self.email, "company": self.company, "role": self.role,
                "industry": self.industry, "pains": list(self.pains), "goal": self.goal}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _people(rng: np.random.Generator, n: int, taken: set[str] = frozenset()) -> list[tuple[str, str]]:
    pairs = [(f, last) for f in FIRST_NAMES for last in LAST_NAMES if f"{f} {last}" not in taken]
    if n > len(pairs):
        raise ValueError(f"at most {len(pairs)} simulated prospects at once")
    return [pairs[i] for i in rng.permutation(len(pairs))[:n]]


def _company(rng: np.random.Generator, industry: str) -> str:
    kinds = COMPANY_KINDS.get(industry.lower(), ("Group", "Holdings", "Partners"))
    return f"{COMPANY_WORDS[rng.integers(len(COMPANY_WORDS))]} {kinds[rng.integers(len(kinds))]}"


def _prospect(first: str, last: str, company: str, role: str, industry: str, pains, goal: str, base: str):
    return SimulatedProspect(email=f"{first.lower()}.{last.lower()}@{_slug(company)}.example", first_name=first,
                             last_name=last, company=company, role=role, industry=industry, pains=tuple(pains),
                             goal=goal, base=base)


def unseen_prospects(seed: int, n: int) -> list[SimulatedProspect]:
    """`n` prospects from industries and roles that no training scenario of the demo graph has, two or three pains
    each in their own words; the same seed gives the same prospects."""
    rng = np.random.default_rng([seed, 0x0115EE])
    industries = list(UNSEEN_PAINS)
    people = []
    for k, (first, last) in enumerate(_people(rng, n)):
        industry = industries[(k + int(rng.integers(len(industries)))) % len(industries)]
        role = UNSEEN_ROLES[int(rng.integers(len(UNSEEN_ROLES)))]
        options = UNSEEN_PAINS[industry]
        pains = [options[i] for i in rng.choice(len(options), size=int(rng.integers(2, 4)), replace=False)]
        goal = GOALS[int(rng.integers(len(GOALS)))].format(pain=pains[0], first=first)
        people.append(_prospect(first, last, _company(rng, industry), role, industry, pains, goal, "unseen"))
    return people


def look_alikes(graph_document: dict, seed: int, n: int) -> list[SimulatedProspect]:
    """`n` prospects modelled on the graph's scenarios, as many of each as can be (in a shuffled order): a scenario's
    role, industry and goal, two or three of its pains (some in other words), a name and company of their own."""
    scenarios = graph_document["scenarios"]
    taken = {s["prospect"]["name"] for s in scenarios}
    rng = np.random.default_rng([seed, 0x10CA1])
    order = rng.permutation(n)
    people = []
    for (first, last), index in zip(_people(rng, n, taken), order):
        scenario = scenarios[index % len(scenarios)]
        base = scenario["prospect"]
        pains = list(base["pains"])
        kept = rng.choice(len(pains), size=min(len(pains), int(rng.integers(2, 4))), replace=False)
        pains = [PARAPHRASES.get(pains[i], pains[i]) if rng.random() < PARAPHRASE_SHARE else pains[i] for i in kept]
        scenario_first = base["name"].split(" ")[0]
        goal = re.sub(rf"\b{re.escape(scenario_first)}\b", first, scenario["goal"])
        people.append(_prospect(first, last, _company(rng, base["industry"]), base["role"], base["industry"], pains,
                                goal, scenario["id"]))
    return people


def scenario_prospect(scenario: dict) -> SimulatedProspect:
    """A graph scenario's own prospect, as the world reads it (the demo's provider sends the published email to it)."""
    base = scenario["prospect"]
    first, _, last = base["name"].partition(" ")
    return SimulatedProspect(email=f"{_slug(base['name'])}@{_slug(base['company'])}.example", first_name=first,
                             last_name=last, company=base["company"], role=base["role"], industry=base["industry"],
                             pains=tuple(base["pains"]), goal=scenario.get("goal", ""), base=scenario["id"])
