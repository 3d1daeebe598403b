"""The embedded RULER judge: grades each trajectory of a RULER request with a fixed sales-email rubric.

It answers exactly what `art.rewards.ruler_score_group` asks of an LLM judge, and sees only
what an LLM judge would: the serialized trajectories.
"""

import json
import re

from app.agent.email_checks import has_call_to_action, personalization_score, structure_score
from app.agent.text import terms
from app.agent.transcript import Transcript, parse_transcript

RUBRIC_WEIGHTS = {
    "grounding": 0.20,  # every citation names a node the agent actually read
    "relevance": 0.30,  # cited facts speak to the prospect's pains, role and industry
    "personalization": 0.10,  # name, company, role or industry
    "structure": 0.15,  # subject, greeting, sign-off, 70–170 words
    "call_to_action": 0.10,  # a clear ask near the end
    "efficiency": 0.15,  # few wasted turns: errors, drafts, reads that were not cited
}

_CONTEXT = re.compile(r"<context>\n(.*?)\n</context>", re.S)
_TRAJECTORY = re.compile(r'<trajectory id="([^"]+)">\n(.*?)\n</trajectory>', re.S)


def grade(t: Transcript) -> tuple[float, dict[str, float]]:
    email = t.final_email
    if email is None:
        return 0.0, {}
    prospect = t.prospect
    cited = [t.nodes[c] for c in email.citations if c in t.nodes and t.nodes[c].read]
    pains = [terms(str(p)) for p in prospect.get("pains") or []]
    role_industry = terms(f"{prospect.get('role', '')} {prospect.get('industry', '')}")
    node_words = [terms(f"{n.title} {n.facts} {' '.join(n.tags)}") for n in cited]
    covered = set().union(*node_words) if node_words else set()
    pain_coverage = sum(bool(p & covered) for p in pains) / max(1, len(pains))
    on_topic = sum(any(p & w for p in pains) or bool(role_industry & w) for w in node_words) / max(1, len(cited))
    wasted = t.tool_errors + t.proposals + len([n for n in t.read_nodes if n.id not in email.citations])
    parts = {
        "grounding": len(cited) / len(email.citations) if email.citations else 0.0,
        "relevance": 0.5 * pain_coverage + 0.5 * on_topic if cited else 0.0,
        "personalization": personalization_score(email.subject, email.body, prospect),
        "structure": structure_score(email.subject, email.body),
        "call_to_action": float(has_call_to_action(email.body)),
        "efficiency": max(0.0, 1.0 - wasted / max(1, t.turns)),
    }
    return sum(RUBRIC_WEIGHTS[k] * v for k, v in parts.items()), parts


def judge(messages: list[dict]) -> dict:
    """RULER's response JSON for a RULER request."""
    user = str(messages[-1].get("content") or "")
    context_match = _CONTEXT.search(user)
    context = json.loads(context_match.group(1)) if context_match else []
    scores = []
    for trajectory_id, body in _TRAJECTORY.findall(user):
        score, parts = grade(parse_transcript(context + json.loads(body)))
        explanation = ", ".join(f"{k} {v:.2f}" for k, v in parts.items()) or "no final email"
        scores.append({"trajectory_id": trajectory_id, "explanation": explanation, "score": round(score, 4)})
    return {"scores": scores}
