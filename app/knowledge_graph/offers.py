"""Who signs a graph's emails and what they ask for, when the request does not say."""

import re

from app.kit.settings import Settings
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Sender

_FILLER = frozenset({"of", "the", "and", "for", "&", "-", "at", "in"})


def signer(requested: Sender | None, graph: KnowledgeGraph, settings: Settings) -> Sender | None:
    """The request's sender, else the graph's, else the SENDER_NAME setting; None: the seller's team signs."""
    if requested is not None:
        return requested
    if graph.sender is not None:
        return graph.sender
    return Sender(name=settings.sender_name, title=settings.sender_title) if settings.sender_name else None


def _role_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _FILLER}


def offer_for(graph: KnowledgeGraph, role: str | None) -> str | None:
    """The graph's ask for a prospect of this role: the first offer one of whose roles (or whose persona node's title)
    has all its words in the role, else the first offer for anyone, else None."""
    mine = _role_words(role or "")
    anyone = None
    for offer in graph.document.offers:
        roles = list(offer.roles) + ([graph.nodes[offer.persona].title] if offer.persona else [])
        if not roles:
            anyone = anyone or offer.ask
        elif mine and any(_role_words(r) and _role_words(r) <= mine for r in roles):
            return offer.ask
    return anyone
