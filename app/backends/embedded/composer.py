"""Turns the policy's decisions (cited nodes, tone, length, call to action) into an email.

The embedded policy is not a language model: every sentence here is either a template about the
prospect (their role, company, pains and the scenario's goal) or a fact sentence taken verbatim
from a cited node. The email is written to the prospect, benefit first:

- the subject names the pain the email answers (never just the vendor's name);
- the first line is about the prospect's situation, phrased so that it reads correctly for any
  role or industry string (no pluralised job titles, a correct "a"/"an");
- each proof point is the one sentence of a cited node that overlaps most with the prospect's
  pains (then role and industry), introduced by the pain it answers;
- context nodes (see `is_context`) shape the wording but are never quoted;
- the ask takes its words from the scenario's goal, in the form the call-to-action decision
  chose, and the length is fitted to the rubric's word band.
"""

import itertools
import math
import re
from dataclasses import dataclass

from app.agent.text import terms, words
from app.agent.transcript import SeenNode

TONES = ("formal", "friendly", "direct")
LENGTHS = ("short", "medium", "long")
CTAS = ("meeting", "resource", "question", "none")

# Word bands per length. Medium stays inside both the rubric's 70–170 words and what a reader
# calls medium (90–149 words); short and long sit at the rubric's edges.
_BANDS = {"short": (70, 89), "medium": (95, 145), "long": (150, 170)}

_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_DANGLING = re.compile(r"(?:it|its|they|their|this|these|those|such)\b", re.I)

# Type words of nodes that describe the vendor, a persona or an industry rather than a product,
# capability or proof. Matched as substrings of the lower-cased node type.
_CONTEXT_TYPE_WORDS = ("company", "persona", "industry", "segment", "overview")
# Type words of nodes that describe a problem rather than an answer to it.
_PROBLEM_TYPE_WORDS = ("pain", "problem", "challenge")

# What a reader takes an ask to be about (mirrors the words the feedback simulator notices).
_MEETING_CUES = ("call", "meeting", "minutes", "meet", "demo")
_RESOURCE_CUES = ("send", "share", "summary", "guide", "report", "case study")
_RESOURCE_NOUNS = frozenset(terms("guide report package summary paper whitepaper brief document checklist playbook "
                                  "template study deck sheet overview estimate assessment"))

_GOAL_ASKER = re.compile(
    r"^(?:get|have|help|convince|persuade|ask|invite|encourage)\s+.+?\s+to\s+(?P<rest>.+)$", re.I
)
_GOAL_VERB = re.compile(
    r"^(?:book|schedule|arrange|set\s+up|secure|organi[sz]e|land|propose|offer|hold|run|plan)\s+(?P<rest>.+)$", re.I
)
_NOUN_PHRASE = re.compile(r"^(?:a|an|the|one|two|three|\d)\b", re.I)
_TOPIC = re.compile(r"\s(?P<prep>about|on|of|regarding|around|covering|for)\s+(?P<topic>.+)$", re.I)
_PURPOSE = re.compile(r"\sto\s+(?P<vp>.+)$", re.I)
_DURATION = re.compile(r"\b(\d+)[- ]minute\b", re.I)


def is_context(node_type: str) -> bool:
    """Whether a node of this type is context (used for wording, never quoted).

    A type is context when it contains "company", "persona", "industry", "segment" or
    "overview": such nodes describe the vendor, a buyer persona or a market, and their facts read
    as a fact sheet when pasted into an email. Every other type (products, features, case
    studies, integrations, certifications, pricing, pain points) can supply proof sentences.
    """
    kind = node_type.lower()
    return any(word in kind for word in _CONTEXT_TYPE_WORDS)


def is_problem(node_type: str) -> bool:
    """Whether a node of this type describes a problem ("pain", "problem" or "challenge" in its type)."""
    kind = node_type.lower()
    return any(word in kind for word in _PROBLEM_TYPE_WORDS)


def article(phrase: str) -> str:
    """ "a" or "an" for a phrase, by how its first word sounds ("an SVP", "a VP", "an hour", "a user")."""
    first = phrase.split()[0] if phrase.split() else ""
    letters = re.sub(r"[^A-Za-z]", "", first)
    if not letters:
        return "a"
    if letters.isupper() and (len(letters) > 1 or len(first) == 1):  # an acronym, spelled out
        return "an" if letters[0] in "AEFHILMNORSX" else "a"
    low = letters.lower()
    if low.startswith(("hour", "honest", "honour", "honor", "heir")):
        return "an"
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one", "once", "ur")):
        return "a"
    return "an" if low[0] in "aeiou" else "a"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _clip_words(text: str, n: int) -> str:
    parts = text.split()
    return " ".join(parts[:n]) + ("…" if len(parts) > n else "")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.split((text or "").strip()) if s.strip()]


@dataclass
class _Proof:
    score: tuple
    title: str
    problem: bool
    sentences: list[str]  # best first
    order: list[str]  # as in the node
    overlaps: dict[str, int]  # pain -> terms the best sentence (or else the node) shares with it
    pain: str | None = None
    used: int = 1


def _proofs(cited: list[SeenNode], pains: list[tuple[str, frozenset[str]]], persona: frozenset[str],
            context: frozenset[str]) -> list[_Proof]:
    """One proof per cited non-context node: its sentences ranked by overlap with the prospect.

    A sentence's rank: how much of the pains it covers (the share of each pain's terms it has,
    summed over the pains; one less when it opens with a pronoun, as it then leans on the sentence
    before), then the pain terms it shares, then the terms it shares with the role, industry and
    context nodes' tags, then with the context nodes' text, then whether it has a figure, then
    its position.
    """
    all_pains = frozenset().union(*(t for _, t in pains)) if pains else frozenset()
    proofs = []
    for position, node in enumerate(cited):
        if is_context(node.type) or not (node.facts or "").strip():
            continue
        ranked = []
        for index, sentence in enumerate(_sentences(node.facts or "")):
            if "?" in sentence:  # a quoted question would read as the email's ask
                continue
            found = terms(sentence)
            dangling = bool(_DANGLING.match(sentence))
            coverage = sum(len(found & t) / len(t) for _, t in pains if t)
            ranked.append(((round(coverage - dangling, 6), len(found & all_pains), len(found & persona),
                            len(found & context), bool(re.search(r"\d", sentence)), -index), sentence))
        if not ranked:
            continue
        ranked.sort(key=lambda pair: pair[0], reverse=True)
        best_score, best = ranked[0]
        overlaps = _speaks_to(terms(best), pains)
        if not overlaps:  # tie it to the pains the node as a whole speaks to
            overlaps = _speaks_to(terms(f"{node.title} {node.facts} {' '.join(node.tags)}"), pains)
        proofs.append(_Proof((*best_score[:4], -position), node.title.strip(),
                             is_problem(node.type), [s for _, s in ranked], _sentences(node.facts or ""), overlaps))
    proofs.sort(key=lambda p: p.score, reverse=True)
    _assign_pains(proofs, [pain for pain, _ in pains])
    return proofs


def _speaks_to(found: frozenset[str], pains: list[tuple[str, frozenset[str]]]) -> dict[str, int]:
    """The pains a text speaks to: it shares two of their terms, or a third of them.

    A term the pain writes with a capital (an acronym or a name: "PHI", "Airflow") is specific,
    and counts twice.
    """
    shared = {}
    for pain, t in pains:
        specific = terms(" ".join(w for w in pain.split() if any(c.isupper() for c in w)))
        n = len(found & t) + len(found & t & specific)
        if n and (n >= 2 or 3 * n >= len(t)):
            shared[pain] = n
    return shared


def _assign_pains(proofs: list[_Proof], pains: list[str]) -> None:
    """Ties each proof to a pain it speaks to, covering as many different pains as possible."""
    options = [list(p.overlaps) or [None] for p in proofs]
    if math.prod(len(o) for o in options) <= 4096:
        def value(choice):
            named = [c for c in choice if c is not None]
            return (len(set(named)), sum(p.overlaps.get(c, 0) for p, c in zip(proofs, choice)),
                    -sum(pains.index(c) for c in named))
        best = max(itertools.product(*options), key=value, default=())
    else:  # greedy: the strongest proof first, preferring pains not yet answered
        best, taken = [], set()
        for p, choice in zip(proofs, options):
            pick = max(choice, key=lambda c: (c not in taken, p.overlaps.get(c, 0), -pains.index(c) if c else 0))
            best.append(pick)
            taken.add(pick)
    for proof, pain in zip(proofs, best):
        proof.pain = pain


def _proof_text(proof: _Proof, seen_pains: set[str], tone: str) -> str:
    body = " ".join(sorted(proof.sentences[: proof.used], key=proof.order.index))
    if proof.order[0] not in proof.sentences[: proof.used] and proof.title:
        # The node's opening sentence names what the fact is about; without it, say so.
        body = f"{body[:-1] if body.endswith('.') else body} ({proof.title})."
    if proof.pain is None:
        return f"Also worth knowing: {body}"
    pain = proof.pain
    if pain.lower() in body.lower():  # the fact names the pain itself
        seen_pains.add(pain)
        return body
    if proof.problem:
        lead = f"If {pain} sounds familiar, you are not alone:"
    elif pain in seen_pains:
        lead = f"Also on {pain}:"
    else:
        lead = {"formal": f"Regarding {pain}:", "friendly": f"On {pain}:", "direct": f"On {pain}:"}[tone]
    seen_pains.add(pain)
    return f"{lead} {body}"


@dataclass
class _Goal:
    phrase: str = ""  # what the goal asks for, as a noun phrase ("a 30-minute call about X") or a verb phrase
    verb: bool = False  # phrase is a verb phrase ("try the sandbox")
    topic: str = ""  # noun phrase after about/on/of ("X")
    prep: str = "about"
    purpose: str = ""  # verb phrase after "to" in a noun phrase ("review an estimate")
    duration: str = ""  # "30-minute"
    resource: str = ""  # a document the goal names ("the technical guide")


def _parse_goal(goal: str, prospect: dict) -> _Goal:
    text = re.sub(r"^\s*goal:\s*", "", goal or "", flags=re.I).strip().rstrip(".!").strip()
    if not text:
        return _Goal()
    if m := _GOAL_ASKER.match(text):
        text = m.group("rest")
    text = re.sub(r"^agree\s+to\s+", "", text, flags=re.I)
    if m := _GOAL_VERB.match(text):
        text = m.group("rest")
    name = str(prospect.get("name") or "").strip()
    for who in filter(None, (name, name.split(" ")[0] if name else "")):
        text = re.sub(rf"\b{re.escape(who)}'s\b", "your", text)
        text = re.sub(rf"\b{re.escape(who)}\b", "you", text)
    text = re.sub(r"\b(?:his|her|their)\b", "your", text)
    if text[1:2].islower():  # "Try the sandbox", "A 30-minute call": the first word is an ordinary word
        text = text[:1].lower() + text[1:]
    g = _Goal(phrase=text, verb=not _NOUN_PHRASE.match(text))
    if m := _DURATION.search(text):
        g.duration = f"{m.group(1)}-minute"
    if g.verb:
        g.resource = _resource(text)
        return g
    topic, purpose = _TOPIC.search(text), _PURPOSE.search(text)
    if topic and not (purpose and purpose.start() < topic.start()):  # "a call about X", not "a call to review Y of Z"
        g.topic, g.prep = topic.group("topic"), topic.group("prep").lower()
    elif purpose:
        g.purpose = purpose.group("vp")
    return g


def _resource(verb_phrase: str) -> str:
    """The document a verb phrase names ("read the guide and reply" → "the guide"), if any."""
    obj = verb_phrase.split(" ", 1)[1] if " " in verb_phrase else ""
    parts = obj.split(" and ")
    for cut in range(1, len(parts) + 1):
        head, tail = " and ".join(parts[:cut]), " and ".join(parts[cut:])
        if terms(head) & _RESOURCE_NOUNS and not terms(tail) & _RESOURCE_NOUNS:
            return head
    return ""


def _cues(text: str, cues: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(cue in low for cue in cues)


def _ask(cta: str, g: _Goal, pain: str, company: str) -> str:
    """The closing ask: its form from the call-to-action decision, its words from the goal."""
    if not g.phrase:  # no goal: a generic ask about the lead pain
        return {
            "meeting": f"Would you be open to a 30-minute call next week to see how this applies to {company}?",
            "resource": "Shall I send you a two-page summary with the details?",
            "question": f"I would like to understand where {pain} sits on your list. "
                        "Is it a priority for your team this quarter?",
            "none": "Thank you for your time.",
        }[cta]
    if cta == "meeting":
        if g.verb:
            ask = (f"Would you be open to a short call next week to walk through {g.resource}?" if g.resource
                   else f"Would you be open to a short call next week, so you can {g.phrase}?")
        elif _cues(g.phrase, _MEETING_CUES):
            ask = f"Would you be open to {g.phrase}?"
        elif g.topic:
            ask = f"Would you be open to a {g.duration or 'short'} call {g.prep} {g.topic}?"
        else:
            ask = f"Would you be open to a short call to set up {g.phrase}?"
        return ask if _cues(ask, _MEETING_CUES) else f"The next step I would suggest: {g.phrase}. Would you be open to a short call?"
    if cta == "resource":
        if g.verb:
            ask = (f"Shall I send you {g.resource}?" if g.resource
                   else f"Shall I send you a short guide to help you {g.phrase}?")
        elif g.topic:
            ask = f"Shall I send you a short summary {g.prep} {g.topic}?"
        elif g.purpose:
            ask = f"Shall I send you a short summary to help you {g.purpose}?"
        else:
            ask = f"Shall I send you a short summary ahead of {g.phrase}?"
        if _cues(ask, _MEETING_CUES) or not _cues(ask, _RESOURCE_CUES):
            ask = f"The next step I would suggest: {g.phrase}. Shall I send you a short summary first?"
        return ask
    if cta == "question":
        if g.verb or g.purpose:
            return f"One option would be to {g.purpose or g.phrase}. Would that be worth your team's time this quarter?"
        if g.topic:
            return f"I would like to understand where {g.topic} sits on your list. Is it a priority for your team this quarter?"
        return f"One option would be {g.phrase}. Would that be worth your team's time this quarter?"
    # none: no question at all
    if g.verb or g.purpose:
        return f"If it would help to {g.purpose or g.phrase}, just reply to this email. Thank you for your time."
    if g.topic:
        return f"If {g.topic} moves up your list, I would be glad to help. Thank you for your time."
    return f"If {g.phrase} would be useful, just reply to this email. Thank you for your time."


def _fillers(tone: str, company: str, industry: str, pains: list[str], lead: str) -> list[str]:
    """Sentences about the prospect and this email, free of claims, to reach the length band.

    Pains are placed after a colon, so that a clause ("reviews take months") reads as well as a
    noun phrase ("slow audit preparation").
    """
    others = [p for p in pains if p != lead]
    lines = []
    if others:
        listed = others[0] if len(others) == 1 else ", ".join(others[:-1]) + " and " + others[-1]
        lines.append(f"I gather {'this is' if len(others) == 1 else 'these are'} on your list as well: {listed}.")
    lines.append(f"I have kept this to the specifics that map to {company}, rather than a generic pitch.")
    lines.append({
        "formal": "I would rather ask than assume, so please correct me if your priorities lie elsewhere.",
        "friendly": "Happy to be told I have this wrong if your priorities are elsewhere right now.",
        "direct": "If this is not a priority right now, tell me and I will not follow up.",
    }[tone])
    lines.append(f"Whatever you decide, I can tailor the details to how your {industry} team works today.")
    return lines


def _greeting(tone: str, name: str) -> str:
    first = name.split(" ")[0]
    return {"formal": f"Dear {name},", "friendly": f"Hi {first},", "direct": f"{first},"}[tone]


def _pains(prospect: dict) -> list[str]:
    pains = [str(p).strip().rstrip(".") for p in prospect.get("pains") or [] if str(p).strip()]
    return pains or ["growing operational complexity"]


def _name_and_company(prospect: dict) -> tuple[str, str]:
    """How the email names the prospect and their company, with a fallback for either missing."""
    return str(prospect.get("name") or "there").strip(), str(prospect.get("company") or "your company").strip()


def angle_of(body: str, prospect: dict, goal: str = "") -> dict[str, str]:
    """The tone, length and call to action of an email this composer wrote, as far as it recognises them.

    How the policy reads an exemplar: its own greeting, word band and ask are recognised exactly;
    anything it did not write (a human's or an LLM's email) yields fewer keys, or none.
    """
    name, company = _name_and_company(prospect)
    paragraphs = [p.strip() for p in body.strip().split("\n\n")]
    angle = {}
    tones = [t for t in TONES if paragraphs[0] == _greeting(t, name)]
    if len(tones) == 1:
        angle["tone"] = tones[0]
    n = words(body)
    angle |= {"length": length for length, (low, high) in _BANDS.items() if low <= n <= high}
    if len(paragraphs) >= 2:
        goal_parsed = _parse_goal(goal, prospect)
        ctas = {cta for cta in CTAS for pain in _pains(prospect) if paragraphs[-2] == _ask(cta, goal_parsed, pain, company)}
        if len(ctas) == 1:
            angle["cta"] = ctas.pop()
    return angle


def compose(prospect: dict, cited: list[SeenNode], tone: str, length: str, cta: str, *, goal: str = "") -> tuple[str, str]:
    """(subject, body) of the email for these decisions; `goal` is the scenario's goal, for the ask."""
    name, company = _name_and_company(prospect)
    first = name.split(" ")[0]
    role = str(prospect.get("role") or "leader").strip()
    industry = str(prospect.get("industry") or "your industry").strip()
    pains = _pains(prospect)
    pain_terms = [(p, terms(p)) for p in pains]

    context_nodes = [n for n in cited if is_context(n.type)]
    context = frozenset().union(*(terms(f"{n.title} {' '.join(n.tags)} {n.facts or ''}") for n in context_nodes))
    persona = terms(f"{role} {industry}") | frozenset().union(*(terms(" ".join(n.tags)) for n in context_nodes))
    proofs = _proofs(cited, pain_terms, persona, context)

    # The lead pain: the one the strongest proof point answers; without proof points, the one the
    # context nodes speak to most, then the prospect's own order.
    answered = [p.pain for p in proofs if p.pain and not p.problem] + [p.pain for p in proofs if p.pain]
    lead = answered[0] if answered else max(pains, key=lambda p: (len(terms(p) & context), -pains.index(p)))

    subjects = [
        {"formal": f"{company}: {lead}", "friendly": f"{first}, on {lead}", "direct": f"{_capital(lead)} at {company}"}[tone],
        {"formal": f"{first}, regarding {lead}", "friendly": f"{first}, on {lead}", "direct": f"{first}: {lead}"}[tone],
    ]
    subject = next((s for s in subjects if len(s.split()) <= 10), subjects[-1])
    greeting = _greeting(tone, name)
    a_role = f"{article(role)} {role}"
    opener = {
        "formal": f"As {company}'s {role}, you likely have this on your desk: {lead}.",
        "friendly": f"Hope your week is going well. I imagine that, as {a_role} at {company}, "
                    f"you hear about this more than you would like: {lead}.",
        "direct": f"{_capital(lead)}: a hard problem for {industry} teams like yours at {company}.",
    }[tone]
    ask = _ask(cta, _parse_goal(goal, prospect), lead, company)
    sign_off = {"formal": "Kind regards,\nAlex", "friendly": "Cheers,\nAlex", "direct": "Best,\nAlex"}[tone]
    fillers = _fillers(tone, company, industry, pains, lead)

    low, high = _BANDS[length]
    active = list(proofs)
    chosen_fillers: list[str] = []

    def render() -> str:
        seen: set[str] = set()
        ordered = [p for p in active if p.problem] + [p for p in active if not p.problem]
        intro = " ".join([opener, *chosen_fillers[:1]])
        middle = [_proof_text(p, seen, tone) for p in ordered]
        closing = [" ".join(chosen_fillers[1:])] if chosen_fillers[1:] else []
        return "\n\n".join([greeting, intro, *middle, *closing, ask, sign_off])

    while words(render()) > high and len(active) > 1:
        active.pop()  # the weakest proof point goes first
    extra = [p for p in active if len(p.sentences) > 1]
    steps = [("filler", f) for f in fillers]
    deepest = max((len(p.sentences) for p in extra), default=0)
    more = [("sentence", p) for k in range(1, deepest) for p in extra if len(p.sentences) > k]  # round robin
    steps = more + steps if length == "long" else steps + more
    for kind, item in steps:
        if words(render()) >= low:
            break
        if kind == "filler":
            chosen_fillers.append(item)
        elif item.used < len(item.sentences):
            item.used += 1
        else:
            continue
        if words(render()) > high:  # does not fit: undo
            if kind == "filler":
                chosen_fillers.pop()
            else:
                item.used -= 1
    return _clip_words(subject, 12), render()
