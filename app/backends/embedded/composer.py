"""Turns the policy's decisions (cited nodes, tone, length, call to action) into the email a salesperson would send.

The embedded policy is not a language model: every sentence here is a template about the prospect, the seller or
the ask, or a sentence of a cited node's facts. The rules it writes to are the checks of `app.agent.email_checks`,
which the embedded judge grades by (tests/unit/test_composer.py holds the composer to each):

- it says who writes: the seller (the prompt's `<seller>`, the graph's company node) and, in one clause, what it
  does ("Acme, a payments automation company");
- it refers to the prospect's lead pain inside a sentence ("you are likely dealing with …"), never as a heading,
  and writes each pain out once;
- every cited product, feature, story or problem gets a paragraph that says what it is ("our Ledger product",
  "one customer's results") before what it does, tied to the pains its facts answer; context nodes (company,
  persona, industry, segment, overview) shape the wording but are never quoted;
- every pain that a cited fact speaks to is answered by that fact;
- no filler: the length band is reached with more of the cited facts, never with sentences about nothing (an
  email short of material stays short);
- the ask turns the goal into a question of the form the call-to-action decision chose;
- possessives ("Hydraulics'") and articles ("an SVP", "a VP") follow the words they attach to.

It is deterministic given the decisions, as GRPO needs: the same decisions always write the same email.
"""

import re
from dataclasses import dataclass, field

from app.agent.email_checks import MEETING_CUES, RESOURCE_CUES, is_clause, speaks_to
from app.agent.text import article, possessive, sentences, terms, words
from app.agent.transcript import SeenNode

TONES = ("formal", "friendly", "direct")
LENGTHS = ("short", "medium", "long")
CTAS = ("meeting", "resource", "question", "none")
SENDER = "Alex"

# Word bands per length. Medium stays inside both the rubric's 70–170 words and what a reader
# calls medium (90–149 words); short and long sit at the rubric's edges.
_BANDS = {"short": (70, 89), "medium": (95, 145), "long": (150, 170)}

_DANGLING = re.compile(r"(?:they|their|this|these|those|such)\b", re.I)
_PRONOUN_START = re.compile(r"(?:it|its)\b", re.I)

# Type words of nodes that describe the vendor, a persona or an industry rather than a product,
# capability or proof. Matched as substrings of the lower-cased node type.
_CONTEXT_TYPE_WORDS = ("company", "persona", "industry", "segment", "overview")
# Type words of nodes that describe a problem rather than an answer to it.
_PROBLEM_TYPE_WORDS = ("pain", "problem", "challenge")
# Type words of nodes that tell a customer's results.
_STORY_TYPE_WORDS = ("case", "story", "customer", "testimonial", "reference")
# A name that already ends in a word like these says what it is ("our Slack integration", "our Starter plan").
_HEAD_NOUNS = frozenset("plan plans integration integrations pricing report package program programme certification "
                        "add-on addon api service platform app tool module feature features product products".split())
_RESOURCE_NOUNS = frozenset(terms("guide report package summary paper whitepaper brief document checklist playbook "
                                  "template study deck sheet overview estimate assessment"))
_GOAL_ASKER = re.compile(
    r"^(?:get|have|help|convince|persuade|ask|invite|encourage)\s+.+?\s+to\s+(?P<rest>.+)$", re.I
)
_GOAL_VERB = re.compile(
    r"^(?:book|schedule|arrange|set\s+up|secure|organi[sz]e|land|propose|offer|hold|run|plan)\s+(?P<rest>.+)$", re.I
)
# A comma that ends the seller's clause: one not followed by the rest of a list (words, then "and" or "or", to the end)
# unless what follows opens a phrase of its own ("…, with offices in Paris and Oslo").
_CLAUSE_END = re.compile(r",(?!\s+(?!(?:with|in|for|from|by|at|on|which|who|where|including|across)\b)[^,]*\b(?:and|or)\b[^,]*$)")
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


def is_story(node_type: str) -> bool:
    """Whether a node of this type tells a customer's results ("case", "story", "customer", … in its type)."""
    kind = node_type.lower()
    return any(word in kind for word in _STORY_TYPE_WORDS)


@dataclass(frozen=True)
class Seller:
    """Who the email is from: the name of the graph's company node and the first sentence of its facts."""

    name: str
    about: str = ""

    @classmethod
    def of(cls, summary: dict | None) -> "Seller | None":
        return cls(summary["name"], summary.get("about", "")) if summary and summary.get("name") else None

    @property
    def brands(self) -> list[str]:
        """How facts name the seller: its full name and, for a name of several words, the first ("Acme")."""
        first = self.name.split()[0]
        return [self.name] + ([first] if first != self.name and len(first) > 2 else [])

    def clause(self) -> str:
        """The seller's name and, in one clause, what it does: "Acme, a payments company" from "Acme is a payments
        company founded in 2015, …", "Acme, which builds payroll software" from "Acme builds payroll software."; the
        name alone when its description does not open with it."""
        text = self.about.strip().rstrip(".")
        rest = next((text[len(b):].strip() for b in self.brands if text.startswith(b + " ")), "")
        rest = re.split(r";|\s(?:founded|headquartered|based|established|incorporated|since)\b", rest, maxsplit=1)[0]
        # a comma ends the clause, unless it lists ("for trucking, delivery and construction fleets")
        rest = re.split(_CLAUSE_END, rest, maxsplit=1)[0].strip()
        if m := re.match(r"(?:is|was)\s+((?:a|an|the)\s.+)$", rest):
            return f"{self.name}, {m.group(1)}"
        if rest and rest.split()[0].endswith("s") and not rest.split()[0].endswith("ss") and len(rest.split()) > 1:
            return f"{self.name}, which {rest}"
        return self.name


def _np(pain: str) -> str:
    """A pain as a noun phrase: a clause ("reviews take months") becomes "the fact that reviews take months"."""
    return f"the fact that {pain}" if is_clause(pain) else pain


def _join(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _clip_words(text: str, n: int) -> str:
    parts = text.split()
    return " ".join(parts[:n]) + ("…" if len(parts) > n else "")


def _named(word: str, text: str) -> bool:
    """Whether `text` shows a capitalised word to be a name: an acronym, a word with a digit or inner capitals, or
    one it capitalises mid-sentence."""
    bare = word.strip("\"'(),:;")
    if bare.isupper() or any(c.isdigit() for c in bare) or any(c.isupper() for c in bare[1:]):
        return True
    return bool(re.search(rf"[^.!?\s]\s+{re.escape(bare)}\b", text))


@dataclass
class _Sentence:
    text: str
    index: int  # in the node's facts
    pains: frozenset[str]  # the pains it speaks to
    rank: tuple


@dataclass
class _Item:
    """A cited node that the email quotes, and the sentences of it chosen so far."""

    node: SeenNode
    kind: str  # "problem", "offering" or "story"
    position: int
    sentences: list[_Sentence]  # best first
    chosen: list[_Sentence] = field(default_factory=list)

    @property
    def pains(self) -> list[str]:
        return sorted({p for s in self.chosen for p in s.pains}, key=lambda p: self._order[p])

    _order: dict = field(default_factory=dict)


def _items(cited: list[SeenNode], pains: list[str], persona: frozenset[str]) -> list[_Item]:
    """One item per cited node with quotable facts: its sentences ranked by what they answer.

    A sentence's rank: the pains it speaks to, then how much of the pains it covers (the share of each pain's terms
    it has, summed), then the terms it shares with the role, industry and context nodes, then whether it has a
    figure, then whether it leans on a sentence before it ("They …", "These …"), then its position.
    """
    order = {p: i for i, p in enumerate(pains)}
    pain_terms = [terms(p) for p in pains]
    items = []
    for position, node in enumerate(cited):
        if is_context(node.type) or not (node.facts or "").strip():
            continue
        kind = "problem" if is_problem(node.type) else "story" if is_story(node.type) else "offering"
        ranked = []
        for index, text in enumerate(sentences(node.facts or "")):
            if "?" in text:  # a quoted question would read as the email's ask
                continue
            found = terms(text)
            spoken = frozenset(p for p in pains if speaks_to(found, p))
            coverage = sum(len(found & t) / len(t) for t in pain_terms if t)
            dangling = bool(_DANGLING.match(text)) or (kind != "offering" and bool(_PRONOUN_START.match(text)))
            rank = (len(spoken), round(coverage, 6), len(found & persona), bool(re.search(r"\d", text)), -dangling, -index)
            ranked.append(_Sentence(text, index, spoken, rank))
        if ranked:
            ranked.sort(key=lambda s: s.rank, reverse=True)
            items.append(_Item(node, kind, position, ranked, _order=order))
    return items


def _take(item: _Item, sentence: _Sentence) -> None:
    """Chooses a sentence, with the one before it in the node when it leans on that one ("They …", "These …"), and
    a story's first sentence, which says whose story it is."""
    needs = [sentence.index - 1] if _DANGLING.match(sentence.text) else []
    needs += [0] if item.kind == "story" else []
    for index in needs:
        before = next((s for s in item.sentences if s.index == index), None)
        if before is not None and before not in item.chosen:
            item.chosen.append(before)
    if sentence not in item.chosen:
        item.chosen.append(sentence)


def _choose(items: list[_Item], pains: list[str]) -> None:
    """Each item's best sentence; then, for every pain a cited answer (an offering's or a story's sentence: a problem's
    describes the pain, it does not answer it) speaks to and none chosen does yet, the sentence that answers most of
    the pains still open."""
    for item in items:
        _take(item, item.sentences[0])
    answers = [item for item in items if item.kind != "problem"]
    covered = {p for item in answers for s in item.chosen for p in s.pains}
    for pain in pains:
        if pain in covered:
            continue
        options = [(len(s.pains - covered), s.rank, -item.position, item, s)
                   for item in answers for s in item.sentences if pain in s.pains and s not in item.chosen]
        if options:
            *_, item, best = max(options, key=lambda o: o[:3])
            _take(item, best)
            covered |= best.pains


def _display_name(node: SeenNode, seller: Seller | None) -> str:
    """The node's title as the email names it: without a parenthesis or the seller's brand before it, and in lower
    case when its first word is an ordinary one ("schema drift alerts", but "Audit Vault", "SOC 2")."""
    name = re.sub(r"\s*\([^)]*\)", "", node.title).strip()
    for brand in seller.brands if seller else []:
        if name.startswith(brand + " "):
            name = name[len(brand) + 1:]
            break
    rest = name.split()[1:]
    proper_rest = any(w[:1].isupper() and not w.isupper() for w in rest)
    head = name.split()[0] if name else ""
    if name and not proper_rest and not _named(head, node.facts or ""):
        name = name[:1].lower() + name[1:]
    return name


def _names(node: SeenNode, seller: Seller | None) -> list[str]:
    """The ways a fact may name its node at the start of a sentence, longest first."""
    plain = re.sub(r"\s*\([^)]*\)", "", node.title).strip()
    shown = _display_name(node, seller)
    return sorted({node.title, plain, shown, _capital(shown)}, key=len, reverse=True)


def _introduce(node: SeenNode, seller: Seller | None) -> str:
    """What the offering is, before what it does: "our Audit Vault product", "our Slack integration"."""
    name = _display_name(node, seller)
    kind = node.type.lower().replace("_", " ").replace("-", " ").strip()
    last = name.split()[-1].lower() if name.split() else ""
    if not kind or last in _HEAD_NOUNS or last.rstrip("s") == kind.split()[-1].rstrip("s"):
        return f"our {name}"
    return f"our {name} {kind}"


def _lead_sentence(item: _Item, sentence: str, seller: Seller | None) -> str:
    """The first quoted sentence of an item, after its introduction and a colon (a whole sentence, so it keeps its
    capital): an offering's own name at its start becomes "It" or "They" (by the verb after it)."""
    if item.kind == "offering":
        for name in _names(item.node, seller):
            if sentence.lower().startswith(name.lower() + " "):
                rest = sentence[len(name) + 1:]
                verb = rest.split()[0].lower() if rest.split() else ""
                singular = (verb in ("is", "was", "has", "does") or (verb.endswith("s") and not verb.endswith("ss"))
                            if verb not in ("can", "will", "may", "must", "should", "would", "could")
                            else not name.split()[-1].endswith("s"))
                return f"{'It' if singular else 'They'} {rest}"
    return _our(sentence, seller)


def _frame(item: _Item, new: list[str], lead_first: bool, counts: dict[str, int], seller: Seller | None) -> str:
    """The words before the colon: what the item is and which pains it answers. `new`: pains not written out yet;
    `lead_first`: it is the first paragraph to answer the lead pain, which the opener already wrote out; `counts`:
    the stories and the repeat answers so far, so that a second one reads as a second one."""
    refs = _join([_np(p) for p in new]) if new else ""
    again = counts["again"] if item.pains and not new and not lead_first else -1
    counts["again"] += again >= 0
    aside = counts["aside"] if not item.pains else -1
    counts["aside"] += aside >= 0
    if item.kind == "problem":
        if lead_first:
            return "You are not alone in this" + (f", and the same goes for {refs}" if refs else "")
        if refs:
            return f"You are not alone with {refs}"
        return "You may recognise this pattern"
    if item.kind == "story":
        who = "One customer's" if counts["story"] == 0 else "Another customer's"
        counts["story"] += 1
        if lead_first:
            return f"{who} results speak to exactly that" + (f", as well as to {refs}" if refs else "")
        if refs:
            return f"{who} results speak to {refs}"
        return f"{who} results point the same way" if again >= 0 else f"{who} results may interest you" + (
            " as well" if aside else "")
    intro = _capital(_introduce(item.node, seller))
    if lead_first:
        return f"{intro} addresses exactly that" + (f", as well as {refs}" if refs else "")
    if refs:
        return f"{intro} addresses {refs}"
    if again >= 0:
        return f"{intro} helps here too" if again == 0 else f"{intro} also helps with this"
    return [f"You may also find {_introduce(item.node, seller)} useful", f"{intro} may be of interest too",
            f"{intro} is worth a look as well"][min(aside, 2)]


def _paragraphs(items: list[_Item], lead: str, seller: Seller | None) -> list[str]:
    named, paragraphs, counts = {lead}, [], {"story": 0, "again": 0, "aside": 0}
    lead_answered = False
    for item in items:
        pains = item.pains
        new = [p for p in pains if p not in named]
        lead_first = lead in pains and not lead_answered
        frame = _frame(item, new, lead_first, counts, seller)
        named |= set(new)
        lead_answered |= lead_first
        quoted = sorted(item.chosen, key=lambda s: s.index)
        body = " ".join([_lead_sentence(item, quoted[0].text, seller)] + [_our(s.text, seller) for s in quoted[1:]])
        paragraphs.append(f"{frame}: {body}")
    return paragraphs


def _our(sentence: str, seller: Seller | None) -> str:
    """A quoted sentence that opens with the seller's possessive ("Acme's models …") as the writer says it ("Our …")."""
    for brand in seller.brands if seller else []:
        if sentence.startswith(f"{brand}'s "):
            return "Our " + sentence[len(brand) + 3:]
    return sentence


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


_CALL_CUES = MEETING_CUES[:5]  # the words by which the outcome model's features know a meeting ask


def _ask(cta: str, g: _Goal, company: str) -> str:
    """The closing ask: its form from the call-to-action decision, its words from the goal."""
    if not g.phrase:  # no goal: a generic ask
        return {
            "meeting": f"Would you be open to a 30-minute call next week to see how this applies to {company}?",
            "resource": "Shall I send you a two-page summary with the details?",
            "question": "Is this a priority for your team this quarter?",
            "none": "If you would like the details, just reply to this email. Thank you for your time.",
        }[cta]
    # a call is "about" its topic whatever preposition the goal's own noun took ("a walkthrough of X")
    prep = "about" if g.prep in ("of", "for") else g.prep
    if cta == "meeting":
        if g.verb:
            ask = (f"Would you be open to a short call next week to walk through {g.resource}?" if g.resource
                   else f"Would you be open to a short call next week, so you can {g.phrase}?")
        elif _cues(g.phrase, _CALL_CUES):
            ask = f"Would you be open to {g.phrase}?"
        elif g.topic:
            length = g.duration or "short"
            ask = f"Would you be open to {article(length)} {length} call {prep} {g.topic}?"
        else:
            ask = f"Would you be open to a short call to set up {g.phrase}?"
        return ask if _cues(ask, _CALL_CUES) else f"The next step I would suggest: {g.phrase}. Would you be open to a short call?"
    if cta == "resource":
        if g.verb:
            ask = (f"Shall I send you {g.resource}?" if g.resource
                   else f"Shall I send you a short guide to help you {g.phrase}?")
        elif g.topic:
            ask = f"Shall I send you a short summary {prep} {g.topic}?"
        elif g.purpose:
            ask = f"Shall I send you a short summary to help you {g.purpose}?"
        else:
            ask = f"Shall I send you a short summary ahead of {g.phrase}?"
        if _cues(ask, _CALL_CUES) or not _cues(ask, RESOURCE_CUES):
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
        return f"If you would like to {g.purpose or g.phrase}, just reply to this email. Thank you for your time."
    if g.topic:
        return f"If {g.topic} moves up your list, I would be glad to help you. Thank you for your time."
    return f"If {g.phrase} would be useful to you, just reply to this email. Thank you for your time."


def _greeting(tone: str, name: str) -> str:
    first = name.split(" ")[0]
    return {"formal": f"Dear {first},", "friendly": f"Hi {first},", "direct": f"{first},"}[tone]


def _opener(tone: str, seller: Seller | None, company: str, role: str, lead: str) -> str:
    """Who writes and what the seller does, then the lead pain in a sentence of its own (never a heading)."""
    who = ""
    if seller:
        who = {"formal": f"I am writing from {seller.clause()}.", "friendly": f"I'm {SENDER} from {seller.clause()}.",
               "direct": f"I work at {seller.clause()}."}[tone] + " "
    as_role = f"as {possessive(company)} {role}"
    pain = {"formal": f"{_capital(as_role)}, you are likely dealing with {_np(lead)}.",
            "friendly": f"I imagine that, {as_role}, you are dealing with {_np(lead)}.",
            "direct": f"{_capital(as_role)}, you are dealing with {_np(lead)}."}[tone]
    return who + pain


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
        ctas = {cta for cta in CTAS if paragraphs[-2] == _ask(cta, goal_parsed, company)}
        if len(ctas) == 1:
            angle["cta"] = ctas.pop()
    return angle


def compose(prospect: dict, cited: list[SeenNode], tone: str, length: str, cta: str, *, goal: str = "",
            seller: Seller | None = None) -> tuple[str, str]:
    """(subject, body) of the email for these decisions; `goal` is the scenario's goal, for the ask; `seller` who
    the email is from."""
    name, company = _name_and_company(prospect)
    first = name.split(" ")[0]
    role = str(prospect.get("role") or "leader").strip()
    pains = _pains(prospect)
    context_nodes = [n for n in cited if is_context(n.type)]
    persona = terms(f"{role} {prospect.get('industry') or ''}") | frozenset().union(
        *(terms(" ".join(n.tags)) for n in context_nodes))

    items = _items(cited, pains, persona)
    _choose(items, pains)
    answered = {p for item in items for p in item.pains}
    lead = next((p for p in pains if p in answered), pains[0])
    kind_order = {"problem": 0, "offering": 1, "story": 2}
    items.sort(key=lambda i: (min((pains.index(p) for p in i.pains), default=len(pains)), kind_order[i.kind], i.position))

    subjects = [
        {"formal": f"{company}: {lead}", "friendly": f"{first}, on {lead}", "direct": f"{_capital(lead)} at {company}"}[tone],
        {"formal": f"{first}, regarding {lead}", "friendly": f"{first}, on {lead}", "direct": f"{first}: {lead}"}[tone],
    ]
    subject = next((s for s in subjects if len(s.split()) <= 10), subjects[-1])
    greeting = _greeting(tone, name)
    opener = _opener(tone, seller, company, role, lead)
    ask = _ask(cta, _parse_goal(goal, prospect), company)
    sign_off = {"formal": f"Kind regards,\n{SENDER}", "friendly": f"Cheers,\n{SENDER}", "direct": f"Best,\n{SENDER}"}[tone]

    def render() -> str:
        return "\n\n".join([greeting, opener, *_paragraphs(items, lead, seller), ask, sign_off])

    # More of the cited facts until the band is reached, the most telling first: only sentences that bear on the
    # prospect (a pain, the role, the industry or the context nodes' tags) or carry a figure, never padding.
    low, high = _BANDS[length]
    spare = [(s.rank, -item.position, item, s) for item in items for s in item.sentences if s.rank[0] or s.rank[2] or s.rank[3]]
    spare.sort(key=lambda o: o[:2], reverse=True)
    for *_, item, sentence in spare:
        if words(render()) >= low:
            break
        if sentence in item.chosen:
            continue
        before = list(item.chosen)
        _take(item, sentence)
        if words(render()) > high:  # does not fit: undo
            item.chosen = before
    return _clip_words(subject, 12), render()
