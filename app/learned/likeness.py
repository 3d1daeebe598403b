"""Which training prospect a new one is most like: it inherits that scenario's learned node scores, lessons and seed nodes.

Likeness is the Jaccard overlap of the words of role, industry and pains (lower-cased, three letters or more): a CFO
in manufacturing who worries about supplier fraud is most like the training CFO whose pains share those words. It
is transparent (a draft names the scenario it was found like), needs no model, and is linear in the text. Ties go to
the scenario listed first in the run's config.
"""

import re

from app.knowledge_graph.schemas import Prospect, Scenario

_WORD = re.compile(r"[a-z0-9]{3,}")


def words(prospect: Prospect) -> set[str]:
    return set(_WORD.findall(" ".join([prospect.role, prospect.industry, *prospect.pains]).lower()))


def likeness(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def most_like(prospect: Prospect, scenarios: list[Scenario]) -> Scenario:
    mine = words(prospect)
    return max(scenarios, key=lambda scenario: likeness(mine, words(scenario.prospect)))
