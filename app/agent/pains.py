"""A pain as a CRM holds it, written into the sentence that needs it.

CRMs hold pains as noun phrases ("sensor data gaps", "price per sensor"), clauses ("gearbox failures on turbines cost
a crane hire each time", "we can't see spend by site"), wishes ("wants to cut truck rolls", "needs SAP integration")
and shorthand ("opex not capex", "no visibility into spend"). `topic` turns each into a phrase that reads after a
preposition ("looking closely at …", "speaks to …"): a noun phrase stays one, a clause becomes "how …", a wish its
object, shorthand the words it stands for. `short` is a few words of it for a subject line.
"""

import re

from app.agent.email_checks import FINITE_VERBS, is_clause

# Words that make a pain a wish or a worry about its object: "wants to cut downtime" → "cutting downtime" is what it
# is about.
LEADS = _LEADS = re.compile(
    r"^(?:(?:we|they|customer|team|client)\s+)?(?:(?:is|are|am)\s+)?"
    r"(?:needs?|wants?|would like|looking for|looks for|seeking|seeks|struggl(?:ing|es?) with|concerned (?:about|with)|"
    r"worried about|worries about|interested in|dealing with|deals with|issues? with|problems? with|pain:|concern:|"
    r"focus(?:ed)? on|asking about|asks about|question about|questions about|evaluating|exploring)\s+", re.I)
# Verbs that, right after a noun and before an object, make a pain a clause even though they double as nouns
# ("failures cost a crane hire", "audits take weeks").
_NOUN_VERBS = frozenset("cost costs take takes need needs run runs break breaks hit hits drive drives mean means cause "
                        "causes force forces delay delays require requires eat eats burn burns block blocks stop stops "
                        "slow slows hurt hurts".split())
# Verbs no pain uses as a noun, and words after which a verb cannot follow as the pain's predicate
_VERBS = frozenset("want wants lose loses stall stalls threaten threatens lag lags limit limits double doubles tripled "
                   "grew rose fell dropped crash crashes pile piles leak leaks overrun overruns miss misses keep keeps "
                   "go goes sit sits hurt hurts cause causes doubled increased decreased spiked jumped climbed stalled slipped".split())
_ADJECTIVES_IN_ED = frozenset("unplanned automated limited scheduled unexpected unresolved outdated detailed advanced "
                              "connected regulated certified".split())
_NOT_SUBJECT = frozenset("a an the of to for by in on at with no not too and or".split())
_OBJECT_START = re.compile(r"^(?:a|an|the|us|them|each|every|too|more|hours|days|weeks|months|years|up|down|money|time|"
                           r"\d|\$|€|£)", re.I)
_PRONOUNS = {"we": "you", "our": "your", "us": "you", "i": "you", "my": "your", "we're": "you're", "we've": "you've",
             "ours": "yours", "i'm": "you're", "me": "you"}
_CONTRAST = re.compile(r"^(?P<a>.+?)\s*(?:,\s*)?(?:\bnot\b|\bvs\.?|\bversus\b|\bover\b|\binstead of\b)\s+(?P<b>[^,]+)$", re.I)


# Words a phrase cannot end on and stay whole
_DANGLING_END = frozenset("a an the of to and or but not no your my our their its is are be being see get".split())


def _clean(pain: str) -> str:
    return re.sub(r"\s+", " ", str(pain)).strip().strip(".;:!-–— ").strip()


def _lower_first(text: str, known: str = "") -> str:
    """The first word in lower case unless it is a name: an acronym, a word with inner capitals or a digit, or one
    `known` (the facts' text) capitalises mid-sentence ("Snowflake", "SAP")."""
    first = text.split(" ", 1)[0]
    bare = first.strip("\"'(),")
    if not bare[:1].isupper() or bare.isupper() and len(bare) > 1 or any(c.isupper() or c.isdigit() for c in bare[1:]):
        return text
    if known and re.search(rf"[^.!?\s]\s+{re.escape(bare)}\b", known):
        return text
    return text[:1].lower() + text[1:]


def _clause_verb(words: list[str]) -> int | None:
    """The position of the verb that makes the pain a clause, if it is one: a verb that is no noun after a noun
    ("breakdowns stall the site", "costs doubled"), or one that doubles as a noun where the words around it say verb
    (before an object, or agreeing with the word before it: "changes break", "device needs")."""
    for i, word in enumerate(words[1:], start=1):
        low, before = word.lower(), words[i - 1].lower()
        if before in _NOT_SUBJECT:
            continue
        if low in _VERBS or (low.endswith("ed") and len(low) > 4 and low not in _ADJECTIVES_IN_ED
                             and before.endswith("s")):
            return i
        if low in _NOUN_VERBS and (
                (i + 1 < len(words) and _OBJECT_START.match(words[i + 1]))
                or (low.endswith("s") and not before.endswith("s") and i + 1 < len(words))  # a last one: "cloud costs"
                or (not low.endswith("s") and before.endswith("s") and not before.endswith("ss"))):
            return i
    if is_clause(" ".join(words)):
        i = next((i for i, w in enumerate(words[1:], start=1) if w.lower() in FINITE_VERBS), None)
        if i is None or (i + 1 == len(words) and words[i].lower() in _NOUN_VERBS):
            return None  # "cloud costs": a plural noun
        if i + 1 < len(words) and words[i + 1].lower().endswith("ing"):
            return None  # "warehouse spend growing …": a noun before a participle, no clause
        return i
    return None


def _you(text: str) -> str:
    """The prospect's own words ("we", "our") as the writer says them ("you", "your"); "US" and "IT" stay."""
    return re.sub(r"\b(?:[Ww]e're|[Ww]e've|I'm|[Ww]e|[Oo]urs?|us|I|[Mm]y|me)\b(?!\.)",
                  lambda m: _PRONOUNS[m.group(0).lower()], text)


def topic(pain: str, known: str = "") -> str:
    """The pain as a phrase that reads after a preposition ("at", "on", "to")."""
    text = _clean(pain)
    if not text:
        return ""
    text = _LEADS.sub("", text)
    text = _you(text)
    if m := re.match(r"^(?:you\s+)?(?:can't|cannot|can not|are unable to|unable to|not able to|are not able to)\s+"
                     r"(?P<rest>.+)$", text, re.I):
        return f"not being able to {m.group('rest')}"
    if m := re.match(r"^(?:no|zero|little|limited|lack of|lacking|missing)\s+(?P<rest>.+)$", text, re.I):
        return f"the lack of {m.group('rest')}"
    if m := re.match(r"^not enough\s+(?P<rest>.+)$", text, re.I):
        return f"a shortage of {m.group('rest')}"
    if m := re.match(r"^to\s+(?P<rest>.+)$", text, re.I):
        return f"how to {m.group('rest')}"
    words = text.split()
    if (verb := _clause_verb(words)) is not None:
        if words[verb].lower().endswith("ed") and words[verb].lower() not in _VERBS:  # a state: "records (are) scattered"
            text = " ".join(words[:verb] + ["are"] + words[verb:])
        return f"how {_lower_first(text, known)}"
    if m := _CONTRAST.match(text):
        a, b = m.group("a").strip(), m.group("b").strip()
        if len(a.split()) <= 4 and len(b.split()) <= 4:
            return f"{_lower_first(a, known)} rather than {b}"
    return _lower_first(text, known)


def short(pain: str, known: str = "", max_words: int = 5) -> str | None:
    """A few words of the pain for a subject line, whole (its subject when it is a clause, the head before "that",
    "which", "on" … when it is long); None when no whole phrase of at most `max_words` words is in it."""
    phrase = topic(pain, known)
    if phrase.startswith(("how to ", "not being able to ")):
        return None
    if phrase.startswith("how "):
        words = phrase[4:].split()
        verb = _clause_verb(words)
        phrase = " ".join(words[:verb]) if verb else ""
        if len(phrase.split()) < 2 or phrase.split()[0].lower() in ("you", "your", "it", "they", "there"):
            return None
    if not phrase:
        return None
    words = phrase.split()
    if len(words) <= max_words:
        return phrase
    for cut in (" that ", " which ", " who ", " when ", " because ", ", ", " on ", " in ", " for ", " across ", " at ",
                " from ", " into ", " by ", " with "):
        head = phrase.split(cut, 1)[0]
        if head != phrase and 2 <= len(head.split()) <= max_words and head.split()[-1].lower() not in _DANGLING_END:
            return head
    return None
