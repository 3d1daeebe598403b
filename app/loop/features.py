"""What any email has that its outcomes may depend on: cited nodes, tone, length band, kind of ask, a personal subject,
and who reads it.

The outcome model learns reply and open rates over these; the demo's simulated readers (`app.simulation`) read the
text their own way and know none of them.
Readers differ: a CFO at a SaaS company may answer a short, direct email about cost that a hospital's CTO ignores. So
each trait is also crossed with the reader's segment (`in:<segment>|<trait>`, the segment being role at industry):
the outcome model learns a trait's weight over every send and, where a segment's own sends say otherwise, how that
segment departs from it.
"""

import hashlib
import re

from app.agent.schemas import Email
from app.agent.text import words

_QUESTION = re.compile(r"[^.!?\n]*\?")
CITES = "cites:"  # the trait of an email that cites a node: `cites:<node id>`
SEGMENT = "segment:"  # the reader's segment itself: its replies' base rate


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


def segment(role: str, industry: str) -> str:
    """A reader's segment as a CRM's fields give it: role at industry, in lower case, spaces collapsed."""
    return f"{' '.join(role.lower().split())} @ {' '.join(industry.lower().split())}"


def in_segment(reader_segment: str, trait: str) -> str:
    """The trait of `trait` read by that segment."""
    return f"in:{reader_segment}|{trait}"


def email_features(email: Email, name: str, company: str, reader_segment: str) -> list[str]:
    """The email's traits as tokens (`cites:<node>`, `tone:formal`, …), each also crossed with the reader's segment,
    and the segment itself; sorted."""
    traits = {f"{CITES}{node}" for node in email.citations} | {
        f"tone:{perceived_tone(email.body)}", f"length:{perceived_length(email.body)}",
        f"ask:{perceived_cta(email.body)}", f"personal_subject:{str(personal_subject(email, name, company)).lower()}",
    }
    return sorted(traits | {in_segment(reader_segment, trait) for trait in traits} | {f"{SEGMENT}{reader_segment}"})


def content_hash(email: Email) -> str:
    """The same text sent twice is the same email: its observed outcomes apply to both."""
    return hashlib.sha256(f"{email.subject}\0{email.body}".encode()).hexdigest()
