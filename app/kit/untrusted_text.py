"""Text that strangers wrote (a prospect's fields come from web forms and CRM imports) made safe to write an email from.

Cleaned: control and format characters (a line break ends a header-like line such as `Bcc: …`, which goes with it)
and markup. Dropped, as whole sentences: payment instructions (an IBAN, wiring money, account or routing numbers) and
text that instructs a model or a reader ("ignore all previous instructions", "enter their password"); links are cut
out. What was done is said, one note per kind and field (`company: control characters removed`), never quoting what
went. Detection reads the NFKC form, so full-width or styled letters do not slip past.
"""

import html
import re
import unicodedata

_CONTROL_CATEGORIES = {"Cc", "Cf", "Co", "Cs"}
_LINE_BREAK = re.compile(r"\r\n|[\r\n\u2028\u2029\x0b\x0c\x85]")
_HEADER_LINE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9-]{0,40}\s*:")  # `Bcc: …`, `Subject: …`, after a line break
_TAG = re.compile(r"<\s*[A-Za-z/!?][^<>]*>?")
_URL = re.compile(r"(?i)\b(?:https?|ftp|file|javascript|data|mailto|ssh|sftp)\s*:\s*\S+|\bwww\.\S+"
                  r"|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,24}/\S*")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_PAYMENT = re.compile(
    r"(?i)\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,7}(?:\s?[a-z0-9]{1,3})?\b"  # an IBAN
    r"|\biban\b|\bswift\b|\bbic\b|\brouting (?:number|no)\b|\bsort code\b|\baccount (?:number|no|#)|\bacct\b"
    r"|\bwire\b.{0,40}\b(?:money|funds|payment|invoice|transfer|amount|\$|€|£)|\b(?:bank|wire) transfer\b"
    r"|\bpay(?:ment)?\b.{0,30}\b(?:to (?:this|the|our|my) (?:account|wallet))|\b(?:bitcoin|btc|crypto) (?:wallet|address)\b"
    r"|\bgift cards?\b")
_INSTRUCTION = re.compile(
    r"(?i)\b(?:ignore|disregard|forget|override)\b.{0,30}\b(?:instructions?|prompts?|directions)\b"
    r"|\b(?:ignore|disregard|forget)\b.{0,20}\b(?:all )?(?:previous|prior|above|earlier|preceding)\b"
    r"|\b(?:enter|type|provide|send|share|confirm|verify|give|submit)\b\s+(?:in\s+|us\s+|me\s+)?(?:their|your|his|her|my|"
    r"the (?:user|customer|admin|account)(?:'s)?)\s+(?:\w+\s+)?(?:passwords?|passcodes?|credentials|log ?ins?|2fa|otp|"
    r"one[- ]time (?:code|password)|pin|security code)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bact as (?:an?|the) (?:ai|assistant|model|system|admin)|\bnew instructions?\b"
    r"|\bjailbreak\b|\binstructions? (?:to|for) the (?:model|assistant|ai)\b")

CONTROL, HEADER, MARKUP, LINK = ("control characters removed", "a header-like line removed", "markup removed",
                                 "a link removed")
PAYMENT, INSTRUCTION = "payment instructions removed", "instruction-like text removed"


def _without_controls(text: str) -> tuple[str, list[str]]:
    notes = []
    lines = _LINE_BREAK.split(text)
    if len(lines) > 1:
        notes.append(CONTROL)
        kept = [lines[0], *(line for line in lines[1:] if not _HEADER_LINE.match(line))]
        if len(kept) < len(lines):
            notes.append(HEADER)
        text = " ".join(kept)
    cleaned = "".join(" " if char == "\t" else char for char in text
                      if char == "\t" or unicodedata.category(char) not in _CONTROL_CATEGORIES)
    if cleaned != text or "\t" in text:
        notes.append(CONTROL)
    return cleaned, list(dict.fromkeys(notes))


def _without_markup(text: str) -> tuple[str, bool]:
    changed = False
    for _ in range(3):  # an entity may spell a tag (`&lt;a href…&gt;`): unescaped, then stripped again
        stripped = _TAG.sub(" ", text)
        unescaped = html.unescape(stripped) if "&" in stripped else stripped
        if unescaped == text:
            break
        changed, text = True, unescaped
    return text, changed


def clean(text: str) -> tuple[str, list[str]]:
    """The text safe to write from, and what was removed (empty when nothing was)."""
    text, notes = _without_controls(text)
    text, marked = _without_markup(text)
    if marked:
        notes.append(MARKUP)
    kept = []
    for sentence in _SENTENCE_END.split(text):
        folded = unicodedata.normalize("NFKC", sentence)
        if _INSTRUCTION.search(folded):
            notes.append(INSTRUCTION)
        elif _PAYMENT.search(folded):
            notes.append(PAYMENT)
        else:
            kept.append(sentence)
    text = " ".join(kept)
    linked = _URL.sub(" ", unicodedata.normalize("NFKC", text))
    if linked != unicodedata.normalize("NFKC", text):
        notes.append(LINK)
        text = linked
    text = re.sub(r"\s+", " ", text).strip(" ,;:-")
    return text, list(dict.fromkeys(notes))
