"""Surface checks of an email that any reader applies: length, structure, personalisation, a clear ask.

Shared by the agent's `propose_email` tool (as feedback) and the embedded judge (as part of its rubric).
"""

import re

from app.agent.text import terms, words

IDEAL_WORDS = (70, 170)
_ASK = frozenset(terms("call chat meet meeting talk schedule book send share walk show demo worth open interested priority connect minutes time"))
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def has_call_to_action(body: str) -> bool:
    """A question near the end that asks for something."""
    tail = [s.strip() for s in _SENTENCE.findall(body) if s.strip()][-4:]
    return any(s.endswith("?") and terms(s) & _ASK for s in tail)


def length_score(body: str) -> float:
    n = words(body)
    low, high = IDEAL_WORDS
    if n < low:
        return max(0.0, n / low)
    if n > high:
        return max(0.0, 1 - (n - high) / high)
    return 1.0


def structure_score(subject: str, body: str) -> float:
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    checks = [
        2 <= len(subject.split()) <= 12,
        bool(lines) and lines[0].endswith((",", "—", ":")),  # a greeting line
        len(lines) >= 3,  # greeting, content, sign-off
    ]
    return 0.5 * length_score(body) + 0.5 * sum(checks) / len(checks)


def personalization_score(subject: str, body: str, prospect: dict) -> float:
    text = f"{subject}\n{body}"
    first_name = str(prospect.get("name", "")).split(" ")[0]
    greeting = body.strip().splitlines()[0] if body.strip() else ""
    checks = [
        bool(first_name) and first_name in greeting,
        str(prospect.get("company", "")) in text,
        bool(terms(f"{prospect.get('role', '')} {prospect.get('industry', '')}") & terms(text)),
    ]
    return sum(checks) / len(checks)


def draft_feedback(subject: str, body: str, prospect: dict) -> dict:
    return {
        "words": words(body),
        "ideal_words": list(IDEAL_WORDS),
        "has_call_to_action": has_call_to_action(body),
        "personalization": round(personalization_score(subject, body, prospect), 2),
        "structure": round(structure_score(subject, body), 2),
    }
