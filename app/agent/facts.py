"""Which facts of a graph answer a prospect's pains: where the agent starts, and whether the prospect fits at all.

A fact answers a pain when a sentence of it speaks to the pain (`speaks_to`: the pain's words, names and acronyms
counting double); a pricing fact with a figure answers a pain about cost ("price per sensor", "opex not capex"), the
pricing node closest to the prospect (its industry, role and other pains) first; an integration answers a pain about
getting data in or out when the prospect's stack (any custom field) names it, and any pain that names its tool
("Snowflake bill growing"). A case study of the prospect's own industry, an integration its stack or its pains name,
rank first among facts that answer the same pains. Context nodes (the
company, personas, industries) and problem nodes answer nothing: they describe, they do not offer.

The same rule decides a draft's `fit`, the agent's start nodes and which sentences the composer quotes, so an email
never quotes a fact that answers none of its prospect's pains.
"""

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from app.agent.email_checks import has_figure, speaks_to
from app.agent.pains import LEADS
from app.agent.text import sentences, terms
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario

CONTEXT_TYPE_WORDS = ("company", "persona", "industry", "segment", "overview")
PROBLEM_TYPE_WORDS = ("pain", "problem", "challenge")
COST_WORDS = terms("cost costs price prices pricing priced budget budgets opex capex spend spending expensive "
                   "affordable afford roi payback licence license licensing subscription fee fees tco cheaper savings "
                   "upfront invoice invoices bill bills")
DATA_FLOW_WORDS = terms("integration integrate integrates connect connector connectors sync syncing silo silos export "
                        "import api rekey rekeyed re-keyed spreadsheet spreadsheets copy copied manual entry")
START_NODES = 4  # facts listed among a prospect's start nodes, besides the graph's own
_INTEGRATION_WORDS = re.compile(r"\b(?:integration|connector|plug-?in|add-?on|native|app)s?\b", re.I)


class FactNode(Protocol):
    """What the rule reads of a node: the graph's `Node`, or the agent's `SeenNode` once read."""

    type: str
    title: str


@lru_cache(maxsize=256)
def is_context(node_type: str) -> bool:
    kind = node_type.lower()
    return any(word in kind for word in CONTEXT_TYPE_WORDS)


@lru_cache(maxsize=256)
def is_problem(node_type: str) -> bool:
    kind = node_type.lower()
    return any(word in kind for word in PROBLEM_TYPE_WORDS)


def is_pricing(node_type: str) -> bool:
    return "pric" in node_type.lower()


def is_integration(node_type: str) -> bool:
    return "integrat" in node_type.lower()


def is_cost(pain: str) -> bool:
    return bool(terms(pain) & COST_WORDS)


def integration_name(title: str) -> frozenset[str]:
    """The words that name what an integration connects to ("SAP" of "SAP integration")."""
    return terms(_INTEGRATION_WORDS.sub(" ", re.sub(r"\([^)]*\)", " ", title)))


def names_tool(title: str, pain: str) -> bool:
    """Whether the pain names what the integration titled `title` connects to: half its name's words or more
    ("BigQuery" of "Google BigQuery")."""
    name = integration_name(title)
    return bool(name) and 2 * len(name & terms(pain)) >= len(name)


def stack_of(prospect: dict) -> frozenset[str]:
    """The words of the prospect's custom fields (its stack, its tools, its notes)."""
    custom = prospect.get("custom") or {}
    return terms(" ".join(str(v) for v in custom.values())) if isinstance(custom, dict) else frozenset()


@lru_cache(maxsize=1 << 12)
def _subject(pain: str) -> frozenset[str]:
    """The pain's terms without its lead-in ("needs", "wants to")."""
    return terms(LEADS.sub("", pain)) or terms(pain)


@lru_cache(maxsize=1 << 12)
def _told(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """A node's sentences with their terms: read again for every prospect's every pain."""
    return tuple((s, terms(s)) for s in sentences(text))


def _shares_words(found: frozenset[str], pain: str) -> bool:
    """`speaks_to`, with distinct words only: one shared name ("IBM" of "IBM Maximo" and "IBM DB2") is not enough
    where the pain has more to it. The pain's own lead-in is not its subject."""
    own = _subject(pain)
    if found.isdisjoint(own):
        return False
    shared = len(found & own)
    return bool(speaks_to(found, pain)) and (shared >= 2 or 2 * shared >= len(own))


def sentence_answers(node: FactNode, sentence: str, pain: str, stack: frozenset[str] = frozenset()) -> bool:
    """Whether this sentence of the node answers the pain (see the module)."""
    if is_context(node.type) or is_problem(node.type):
        return False
    if _shares_words(terms(sentence), pain):
        return True
    if is_pricing(node.type):
        return is_cost(pain) and has_figure(sentence)
    if is_integration(node.type):
        name = integration_name(node.title)
        return names_tool(node.title, pain) or (bool(name) and name <= stack and bool(terms(pain) & DATA_FLOW_WORDS))
    return False


@dataclass(frozen=True)
class Answer:
    """A node and the prospect's pains it answers, with what ranks it: its own industry, a tool of its stack, and how
    close it is to the prospect's words."""

    node_id: str
    pains: tuple[str, ...]
    industry: bool
    stack: bool
    closeness: int
    by_price_only: bool  # a pricing node that answers only through a cost pain, not by its words

    @property
    def rank(self) -> tuple:
        return (len(self.pains), self.industry or self.stack, self.closeness)


def answers(graph: KnowledgeGraph, prospect: dict) -> list[Answer]:
    """The nodes that answer at least one of the prospect's pains, best first; of the pricing nodes that answer only
    a cost pain by their price, the closest to the prospect alone (all that tie)."""
    pains = [str(p) for p in prospect.get("pains") or [] if str(p).strip()]
    if not pains:
        return []
    stack = stack_of(prospect)
    industry = terms(str(prospect.get("industry") or ""))
    mine = terms(" ".join([str(prospect.get("role") or ""), str(prospect.get("industry") or ""), *pains])) - COST_WORDS
    found: list[Answer] = []
    for node in graph.document.nodes:
        if is_context(node.type) or is_problem(node.type):
            continue
        told = _told(node.text)
        answered = tuple(p for p in pains if any(sentence_answers(node, s, p, stack) for s, _ in told))
        if not answered:
            continue
        words = terms(f"{node.title} {node.text} {' '.join(node.tags)}")
        by_words = any(_shares_words(found_terms, p) for _, found_terms in told for p in answered)
        name = integration_name(node.title) if is_integration(node.type) else frozenset()
        ours = bool(name) and (name <= stack or any(names_tool(node.title, p) for p in answered))
        found.append(Answer(node.id, answered, bool(industry) and industry <= words, ours, len(words & mine),
                            not by_words))
    priced = [a for a in found if a.by_price_only]
    if priced:
        closest = max(priced, key=lambda a: a.closeness)  # the first in the document of those that tie
        found = [a for a in found if not a.by_price_only or a is closest]
    return sorted(found, key=lambda a: a.rank, reverse=True)


def scenario_starts(graph: KnowledgeGraph, scenario: Scenario) -> list[str]:
    """A scenario's start nodes: its own seed nodes, then the facts that answer its prospect's pains."""
    seeds = list(scenario.seed_nodes)
    return seeds + [n for n in start_nodes(graph, scenario.prospect.model_dump()) if n not in seeds]


def start_nodes(graph: KnowledgeGraph, prospect: dict, limit: int = START_NODES) -> list[str]:
    """Where the agent starts for this prospect: the facts that answer most of its pains, each pain's best answer
    first (so every pain has a fact to read), then the best of the rest, at most `limit`."""
    found = answers(graph, prospect)
    chosen: list[str] = []
    for pain in [str(p) for p in prospect.get("pains") or []]:
        best = next((a.node_id for a in found if pain in a.pains and a.node_id not in chosen), None)
        if best is not None and len(chosen) < limit:
            chosen.append(best)
    for answer in found:
        if len(chosen) >= limit:
            break
        if answer.node_id not in chosen:
            chosen.append(answer.node_id)
    return chosen


@dataclass(frozen=True)
class Fit:
    high: bool
    reason: str


def fit(graph: KnowledgeGraph, prospect: dict) -> Fit:
    """`high` when some fact answers one of the prospect's pains (which facts, for which pains); `low` when none does
    (which pains nothing answers)."""
    pains = [str(p) for p in prospect.get("pains") or [] if str(p).strip()]
    if not pains:
        return Fit(False, "no pains given: nothing for the graph's facts to answer")
    found = answers(graph, prospect)
    if not found:
        return Fit(False, f"no fact of graph {graph.id!r} answers its pains: {'; '.join(pains)}")
    if all(a.by_price_only for a in found):
        return Fit(False, f"only a price answers its pains; no fact of graph {graph.id!r} answers "
                          f"{'; '.join(p for p in pains if not is_cost(p)) or 'what it would pay for'}")
    answered = {p for a in found for p in a.pains}
    titles = [graph.nodes[a.node_id].title for a in found[:3]]
    open_pains = [p for p in pains if p not in answered]
    return Fit(True, f"{', '.join(titles)} answer {'; '.join(p for p in pains if p in answered)}"
                     + (f" (nothing answers: {'; '.join(open_pains)})" if open_pains else ""))
