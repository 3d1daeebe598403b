"""Simulated online feedback: open and reply rates from prospects' hidden preferences.

Stands in for a real email channel. Preferences exist only for the demo graph's scenarios and
are read from a file that neither the policy nor the judge can see; the simulator itself only
sees the email a prospect would receive.
"""

import math
import re

import numpy as np

from app.agent.schemas import Email
from app.agent.text import words
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.service import hidden_preferences

SENDS = 50  # simulated recipients per email
_QUESTION = re.compile(r"[^.!?\n]*\?")


def perceived_tone(body: str) -> str:
    greeting = body.strip().splitlines()[0].lower() if body.strip() else ""
    if greeting.startswith("dear") or "regards" in body.lower() or "sincerely" in body.lower():
        return "formal"
    if greeting.startswith(("hi", "hello", "hey")) or "cheers" in body.lower():
        return "friendly"
    return "direct"


def perceived_length(body: str) -> str:
    n = words(body)
    return "short" if n < 90 else "medium" if n < 150 else "long"


def perceived_cta(body: str) -> str:
    questions = [q.lower() for q in _QUESTION.findall(body)]
    if not questions:
        return "none"
    last = questions[-1]
    if any(w in last for w in ("call", "meeting", "minutes", "meet", "demo")):
        return "meeting"
    if any(w in last for w in ("send", "share", "summary", "guide", "report", "case study")):
        return "resource"
    return "question"


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def reply_probabilities(email: Email, prospect: dict, preferences: dict) -> tuple[float, float]:
    """(P(open), P(reply | open)) for one prospect."""
    subject = email.subject.lower()
    personal_subject = str(prospect["name"]).split(" ")[0].lower() in subject or str(prospect["company"]).lower() in subject
    tone_match = perceived_tone(email.body) == preferences["tone"]
    open_logit = -0.6 + 0.8 * personal_subject + 0.7 * tone_match - 0.5 * (len(email.subject.split()) > 10)
    interest = min(1.5, sum(preferences["interests"].get(c, 0.0) for c in email.citations))
    disliked = any(c in preferences["dislikes"] for c in email.citations)
    cta = perceived_cta(email.body)
    reply_logit = (
        -2.0
        + 1.5 * interest
        - 1.0 * disliked
        + 0.8 * (cta == preferences["cta"])
        - 1.0 * (cta == "none")
        + 0.6 * (perceived_length(email.body) == preferences["length"])
    )
    return _sigmoid(open_logit), _sigmoid(reply_logit)


class FeedbackSimulator:
    def __init__(self, preferences: dict[str, dict], prospects: dict[str, dict]):
        self.preferences = preferences
        self.prospects = prospects

    def observe(self, scenario_id: str, email: Email | None, seed: int) -> tuple[float, float, float]:
        """(feedback score, open rate, reply rate) from sending the email to SENDS look-alike prospects."""
        if email is None:
            return 0.0, 0.0, 0.0
        p_open, p_reply = reply_probabilities(email, self.prospects[scenario_id], self.preferences[scenario_id])
        rng = np.random.default_rng(seed)
        opens = int(rng.binomial(SENDS, p_open))
        replies = int(rng.binomial(opens, p_reply))
        score = 0.4 * opens / SENDS + 0.6 * (replies / opens if opens else 0.0)
        return score, opens / SENDS, replies / SENDS


def create_feedback(graph: KnowledgeGraph) -> FeedbackSimulator | None:
    """Only graphs with hidden preferences (the demo) get simulated online feedback."""
    preferences = hidden_preferences(graph.id)
    if preferences is None or not set(graph.scenarios) <= set(preferences):
        return None
    return FeedbackSimulator(preferences, {s.id: s.prospect.model_dump() for s in graph.scenarios.values()})
