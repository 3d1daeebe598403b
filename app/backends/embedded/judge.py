"""The embedded RULER judge: grades each trajectory of a RULER request with a salesperson's rubric.

It answers exactly what `art.rewards.ruler_score_group` asks of an LLM judge, and sees only what an LLM judge
would: the serialized trajectories (the prompt with the prospect, the goal and the seller; the facts the agent
read; the email). Each criterion is a check of `app.agent.email_checks` that a salesperson would apply before
sending; docs/architecture/embedded-backend.md explains each, and tests/unit/test_tools_and_judge.py pins the
weights.
"""

import json
import re

from app.agent.email_checks import (
    ask_kind,
    ask_problems,
    concision,
    echoed_pains,
    filler,
    grammar_problems,
    names_seller,
    pain_answers,
    personalization_score,
    read_parts,
    readability,
    speaks_to,
    used_facts,
)
from app.agent.text import sentences, terms
from app.agent.transcript import SeenNode, Transcript, parse_transcript

RUBRIC_WEIGHTS = {
    "pains_answered": 0.20,  # how fully a cited answer (a product, a feature, a story…) speaks to each stated pain
    "ask": 0.15,  # one clear, grammatical question near the end, asking for what the goal wants
    "proof": 0.10,  # a figure behind each pain answered
    "citations_used": 0.10,  # every cited fact is used in the text and bears on the prospect
    "length": 0.10,  # subject, greeting and sign-off; concise (70–125 words); sentences of 20 words or fewer on average
    "grounding": 0.05,  # every citation names a node the agent read
    "efficiency": 0.05,  # few wasted turns: errors, drafts, reads that were not cited
    "seller": 0.05,  # the seller is named with what it does
    "no_echo": 0.05,  # no pain set as a heading or written out twice
    "grammar": 0.05,  # possessives, articles, doubled words, no product named bare at a sentence's start
    "no_filler": 0.05,  # no sentence that carries neither a fact nor a pain
    "personalization": 0.05,  # the name in the greeting, the company, the role or industry
}
ASK_OFF_GOAL = 0.5  # what an ask is worth that asks for something other than the goal names (a call for a report)
_CONTEXT_TYPE_WORDS = ("company", "persona", "industry", "segment", "overview")
_PROBLEM_TYPE_WORDS = ("pain", "problem", "challenge")  # describe a pain: they show it is understood, not answered
_OFFERING_EXCLUDED = (*_CONTEXT_TYPE_WORDS, *_PROBLEM_TYPE_WORDS, "case", "story", "customer", "testimonial", "reference")

_CONTEXT = re.compile(r"<context>\n(.*?)\n</context>", re.S)
_TRAJECTORY = re.compile(r'<trajectory id="([^"]+)">\n(.*?)\n</trajectory>', re.S)


def _product_names(node: SeenNode, seller: str) -> list[str]:
    """How an email may name a cited product or feature: its title, without a parenthesis, without the seller's brand."""
    plain = re.sub(r"\s*\([^)]*\)", "", node.title).strip()
    names = {node.title, plain}
    brand = seller.split()[0] if seller else ""
    for prefix in (seller, brand):
        if prefix and plain.startswith(prefix + " "):
            names.add(plain[len(prefix) + 1:])
    return sorted((n for n in names if n), key=len, reverse=True)


def _form(subject: str, body: str) -> float:
    """A subject of 2–12 words, a greeting line, and a body of at least three lines (greeting, content, sign-off)."""
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    checks = [2 <= len(subject.split()) <= 12, bool(lines) and lines[0].endswith((",", "—", ":")), len(lines) >= 3]
    return sum(checks) / len(checks)


def grade(t: Transcript) -> tuple[float, dict[str, float]]:
    email = t.final_email
    if email is None:
        return 0.0, {}
    prospect = t.prospect
    pains = [str(p) for p in prospect.get("pains") or []]
    seller, about = t.seller.get("name", ""), t.seller.get("about", "")
    cited = [t.nodes[c] for c in email.citations if c in t.nodes and t.nodes[c].read]
    facts = [s for n in cited for s in sentences(n.facts or "")]
    answers = [s for n in cited if not any(w in n.type.lower() for w in (*_CONTEXT_TYPE_WORDS, *_PROBLEM_TYPE_WORDS))
               for s in sentences(n.facts or "")]
    parts = read_parts(email.body)
    used = used_facts(parts, facts)
    body = email.body.lower()
    role_industry = terms(f"{prospect.get('role', '')} {prospect.get('industry', '')}")

    def bears(node: SeenNode) -> bool:
        found = terms(f"{node.title} {node.facts} {' '.join(node.tags)}")
        return any(speaks_to(found, p) for p in pains) or bool(role_industry & found)

    def node_used(node: SeenNode) -> bool:
        if any(word in node.type.lower() for word in _CONTEXT_TYPE_WORDS):
            return node.title.lower() in body  # context shapes the wording: the company, the role, the industry
        return any(fact in used for fact in sentences(node.facts or ""))

    answered = pain_answers(parts, pains, answers)
    answered_with = [figure for coverage, figure in answered.values() if coverage]
    ask = parts.ask
    goal_kind = ask_kind(t.goal)
    off_goal = ask is not None and goal_kind is not None and ask_kind(ask) != goal_kind
    offerings = [n for n in cited if not any(word in n.type.lower() for word in _OFFERING_EXCLUDED)]
    grammar = grammar_problems(parts.content, [name for n in offerings for name in _product_names(n, seller)])
    wasted = t.tool_errors + t.proposals + len([n for n in t.read_nodes if n.id not in email.citations])
    content = [s for s in parts.content if s not in parts.closing]
    parts_scores = {
        "pains_answered": sum(coverage for coverage, _ in answered.values()) / len(pains) if pains else 1.0,
        "ask": 0.0 if ask is None else 0.5 ** min(2, len(ask_problems(parts))) * (ASK_OFF_GOAL if off_goal else 1.0),
        "proof": sum(answered_with) / len(answered_with) if answered_with else 0.0,
        "citations_used": (sum(node_used(n) * (1.0 if bears(n) else 0.5) for n in cited) / len(email.citations)
                           if email.citations else 0.0),
        "grounding": len(cited) / len(email.citations) if email.citations else 0.0,
        "seller": names_seller(parts, seller, about),
        "no_echo": 1.0 - len(echoed_pains(parts, pains, facts)) / len(pains) if pains else 1.0,
        "grammar": max(0.0, 1.0 - len(grammar) / 4),
        "no_filler": 1.0 - len(filler(parts, pains, facts, seller)) / len(content) if content else 0.0,
        "personalization": personalization_score(email.subject, email.body, prospect),
        "length": (_form(email.subject, email.body) + concision(email.body) + readability(parts)) / 3,
        "efficiency": max(0.0, 1.0 - wasted / max(1, t.turns)),
    }
    return sum(RUBRIC_WEIGHTS[k] * v for k, v in parts_scores.items()), parts_scores


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
