"""The offline classifier: rules over the reply's own text and its headers, in English, Spanish, French, German,
Portuguese, Italian, Dutch and Polish.

It decides in this order, and says which rule decided (`Classification.reason`):
1. a delivery report (multipart/report, X-Failed-Recipients, a postmaster or mailer-daemon sender, a bounce subject
   or a bounce text) is a `bounce`, whatever else it carries: exim and Exchange mark their bounces
   `Auto-Submitted: auto-replied` too;
2. an away notice (its words, with or without auto-reply headers) is `out_of_office`, with the return date it states;
3. an auto-reply (RFC 3834's Auto-Submitted, X-Autoreply, Precedence, an auto-reply subject or an automatic text)
   is `auto_reply`;
4. a person's reply: the phrases of `lexicon`, the first category that matches in the order unsubscribe, referral,
   wrong_person, not_interested, meeting, interested, question (a request to stop outranks a refusal, a refusal
   outranks "interesting", a named colleague makes a wrong-person reply a referral);
5. otherwise `unknown`, confidence 0: a language it does not read, or nothing it recognises.
"""

import re
from collections.abc import Mapping
from datetime import datetime

from app.outcomes.replies import lexicon
from app.outcomes.replies.dates import return_date
from app.outcomes.replies.lexicon import fold
from app.outcomes.replies.types import Classification, DecidedBy, ReplyCategory

MAX_REPORT_CHARS = 4000  # of the own text, what a delivery report is recognised in (one expression: cheap)
MAX_CLASSIFIED_CHARS = 1000  # of the own text, what the phrases are looked for in: a reply's deciding words come first
_AUTO_PRECEDENCE = {"auto_reply", "bulk", "junk"}  # not "list": a person's reply through a mailing list
_EMAIL = re.compile(r"[^\s@<>()]{1,64}@[^\s@<>()]{1,255}\.[a-z]{2,}")
_WORD = re.compile(r"[^\W\d_]+")
_NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff\u0590-\u06ff\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_COLLEAGUE = re.compile(r"colleague|collegue|kolleg|colega|collega|kolezank|kolega|compan(ero|era)|head of|cc'?d|copied|"
                        r"\b(cto|ceo|cfo|coo|vp)\b")
_HUMAN_ORDER = (
    (ReplyCategory.unsubscribe, lexicon.UNSUBSCRIBE, 0.9),
    (ReplyCategory.referral, lexicon.REFERRAL, 0.8),
    (ReplyCategory.wrong_person, lexicon.WRONG_PERSON, 0.85),
    (ReplyCategory.not_interested, lexicon.NOT_INTERESTED, 0.85),
    (ReplyCategory.meeting, lexicon.MEETING, 0.85),
    (ReplyCategory.interested, lexicon.INTERESTED, 0.75),
    (ReplyCategory.question, lexicon.QUESTION, 0.7),
)


def _decided(category: ReplyCategory, confidence: float, reason: str, returns_on=None) -> Classification:
    return Classification(category, confidence, DecidedBy.rules, reason, returns_on)


_VOCABULARY = {language: set(words.split())
               for language, words in {**lexicon.STOPWORDS, **lexicon.OTHER_STOPWORDS}.items()}


def language_of(folded: str, original: str) -> str | None:
    """The language the reply is written in, of those `lexicon` reads; None for any other (or none at all)."""
    if _NON_LATIN.search(original):
        return None
    words = _WORD.findall(folded)
    scores = {language: sum(word in vocabulary for word in words)
              for language, vocabulary in _VOCABULARY.items()}
    best = max(scores, key=scores.get)
    if scores[best] == 0 or best in lexicon.OTHER_STOPWORDS:
        return None
    return best


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((str(value) for key, value in headers.items() if key.lower() == name), "")


def _bounce(headers: Mapping[str, str], subject: str, folded: str) -> str | None:
    content_type = _header(headers, "content-type").lower()
    if content_type.startswith("multipart/report") and "delivery-status" in content_type:
        return "a delivery report (Content-Type multipart/report; report-type=delivery-status)"
    for name in ("x-failed-recipients", "x-mlserver"):  # a failed delivery's addresses; a list server's notice
        if _header(headers, name):
            return f"header {name}"
    sender = fold(_header(headers, "from"))
    address = next(iter(_EMAIL.findall(sender)), sender)
    if lexicon.BOUNCE_SENDER.search(address) or lexicon.BOUNCE_SENDER.search(sender):
        return f"sender {address or sender!r}"
    if match := lexicon.BOUNCE_SUBJECT.search(subject):
        return f"subject {match.group()!r}"
    if match := lexicon.BOUNCE_TEXT.search(folded):
        return f"delivery-failure text {match.group()!r}"
    return None


def _auto_header(headers: Mapping[str, str]) -> str | None:
    submitted = _header(headers, "auto-submitted").split(";")[0].strip().lower()
    if submitted and submitted != "no":
        return f"header Auto-Submitted: {submitted}"
    for name in ("x-autoreply", "x-autorespond", "x-autoresponse"):
        if _header(headers, name):
            return f"header {name}"
    precedence = _header(headers, "precedence").strip().lower()
    if precedence in _AUTO_PRECEDENCE:
        return f"header Precedence: {precedence}"
    return None


def classify_reply(own_text: str, headers: Mapping[str, str], received_at: datetime) -> Classification:
    """The reply's category; `own_text` is the reply's own text (see `own_text`), `headers` its header fields
    (names case-insensitive; {} when there are none), `received_at` when it came (a stated return date is read
    relative to it)."""
    subject = fold(_header(headers, "subject"))[:500]
    if reason := _bounce(headers, subject, fold(own_text[:MAX_REPORT_CHARS])):
        return _decided(ReplyCategory.bounce, 0.95, reason)
    text = own_text[:MAX_CLASSIFIED_CHARS]
    folded = fold(text)
    language = language_of(folded, text)
    auto = _auto_header(headers)
    auto_subject = lexicon.AUTO_SUBJECT.search(subject)
    away = lexicon.OUT_OF_OFFICE.search(folded) or (auto or auto_subject) and lexicon.OUT_OF_OFFICE.search(subject)
    if away:
        marked = auto or (auto_subject and f"subject {auto_subject.group()!r}")
        returns_on = return_date(folded, received_at)
        reason = f"away notice {away.group()!r}" + (f", {marked}" if marked else "")
        return _decided(ReplyCategory.out_of_office, 0.95 if marked else 0.8, reason, returns_on)
    automatic = lexicon.AUTO_TEXT.search(folded)
    if auto or auto_subject:
        reason = auto or f"subject {auto_subject.group()!r}"
        return _decided(ReplyCategory.auto_reply, 0.9 if auto else 0.75, reason)
    for category, pattern, confidence in _HUMAN_ORDER:
        match = pattern.search(folded)
        if match is None:
            continue
        if category is ReplyCategory.referral and not (_EMAIL.search(folded) or _COLLEAGUE.search(folded)):
            continue  # "contact …" that names no one: read on (a wrong-person or a meeting reply)
        if category is ReplyCategory.question and language is None:
            break
        return _decided(category, confidence if language else confidence - 0.2, f"phrase {match.group()!r}")
    if automatic:
        return _decided(ReplyCategory.auto_reply, 0.7, f"automatic text {automatic.group()!r}")
    if language and text.rstrip().endswith("?"):
        return _decided(ReplyCategory.question, 0.6, "a question mark")
    if language is None:
        return _decided(ReplyCategory.unknown, 0.0, "a language the rules do not read")
    return _decided(ReplyCategory.unknown, 0.0, f"no phrase the rules know (read as {language})")
