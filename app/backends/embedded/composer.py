"""Turns the policy's decisions (cited nodes, tone, length, call to action) into an email.

The embedded policy is not a language model: every sentence here is a template or a fact
taken verbatim from a node the agent read.
"""

import re

from app.agent.transcript import SeenNode

TONES = ("formal", "friendly", "direct")
LENGTHS = ("short", "medium", "long")
CTAS = ("meeting", "resource", "question", "none")

_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_FACT_SENTENCES = {"short": 1, "medium": 2, "long": 99}


def _clip_words(text: str, n: int) -> str:
    parts = text.split()
    return " ".join(parts[:n]) + ("…" if len(parts) > n else "")


def _mid_sentence(text: str) -> str:
    """Lower-cases a leading capital unless it starts an acronym ("PHI", "SOC")."""
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def compose(prospect: dict, cited: list[SeenNode], tone: str, length: str, cta: str) -> tuple[str, str]:
    name = str(prospect.get("name") or "there")
    first = name.split(" ")[0]
    company = str(prospect.get("company") or "your company")
    role = str(prospect.get("role") or "leader")
    industry = str(prospect.get("industry") or "your industry")
    pains = [str(p) for p in prospect.get("pains") or []] or ["growing operational complexity"]
    pain = pains[0].rstrip(".")
    lead = cited[0].title if cited else industry

    subject = {
        "formal": f"{company}: {lead}",
        "friendly": f"{first}, an idea on {_mid_sentence(pain)}",
        "direct": f"{pain} at {company}",
    }[tone]
    greeting = {"formal": f"Dear {name},", "friendly": f"Hi {first},", "direct": f"{first},"}[tone]
    opener = {
        "formal": f"As {role} at {company}, you are likely weighing how to address {_mid_sentence(pain)} in {industry}.",
        "friendly": f"Hope your week is going well. Many {role}s in {industry} tell us {_mid_sentence(pain)} is top of mind.",
        "direct": f"{pain} slows {industry} teams like {company}'s down.",
    }[tone]
    facts = []
    for node in cited:
        sentences = _SENTENCES.split((node.facts or node.title).strip())
        facts.append(" ".join(sentences[: _FACT_SENTENCES[length]]))
    if len(pains) > 1 and length != "short":
        facts.append(f"It also helps with {', '.join(_mid_sentence(p) for p in pains[1:])}.")
    ask = {
        "meeting": f"Would you be open to a 30-minute call next week to see how this applies to {company}?",
        "resource": "Shall I send you a two-page summary with the details?",
        "question": f"Is {_mid_sentence(pain)} a priority for your team this quarter?",
        "none": "Thank you for your time.",
    }[cta]
    sign_off = {"formal": "Kind regards,\nAlex", "friendly": "Cheers,\nAlex", "direct": "Best,\nAlex"}[tone]
    body = "\n\n".join([greeting, opener, *facts, ask, sign_off])
    return _clip_words(subject, 12), body
