"""What any email has that its outcomes may depend on: cited nodes, tone, length band, kind of ask, a personal subject.

The outcome model learns reply and open rates over these; the demo's simulated prospects react to the same traits.
"""

import hashlib
import re

from app.agent.schemas import Email
from app.agent.text import words

_QUESTION = re.compile(r"[^.!?\n]*\?")
CITES = "cites:"  # the trait of an email that cites a node: `cites:<node id>`


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


def personal_subject(email: Email, name: str, company: str) -> bool:
    subject = email.subject.lower()
    return bool(name) and name.split(" ")[0].lower() in subject or bool(company) and company.lower() in subject


def email_features(email: Email, name: str, company: str) -> list[str]:
    """The email's traits as tokens (`cites:<node>`, `tone:formal`, …), sorted."""
    return sorted({f"{CITES}{node}" for node in email.citations} | {
        f"tone:{perceived_tone(email.body)}", f"length:{perceived_length(email.body)}",
        f"ask:{perceived_cta(email.body)}", f"personal_subject:{str(personal_subject(email, name, company)).lower()}",
    })


def content_hash(email: Email) -> str:
    """The same text sent twice is the same email: its observed outcomes apply to both."""
    return hashlib.sha256(f"{email.subject}\0{email.body}".encode()).hexdigest()
