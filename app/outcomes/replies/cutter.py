"""The reply's own text: what its sender wrote, without the quoted history, mobile signatures and list footers.

Read line by line, in one pass, with expressions that never backtrack over more than one bounded line (a line longer
than MAX_HEADER_LINE_CHARS is never a header, and is only kept or cut with the lines around it), so that the cost
is linear in the text whatever a sender puts in it.

What is cut:
- an attribution line ("On … wrote:", "Le … a écrit :", "Am … schrieb …:", "El … escribió:", "Em … escreveu:",
  "Il giorno … ha scritto:", "Op … schreef …:", "W dniu … napisał:", "ср, 30 апр. 2025 г. в 15:19, … <…>:",
  "26.06.2014, 14:41, "…" <…>:", over up to three lines as clients wrap it), with the quoted block under it; text
  after that block (a reply written under or between the quotes) is kept; an attribution followed by unquoted
  history cuts everything from it on;
- a header block ("From: … Sent: … To: …", Outlook's and webmail's, in the languages of HEADER_FIELDS), from it on;
- "-----Original Message-----", "Forwarded message" and their translations, from them on;
- quoted lines ("> …") anywhere;
- a mobile client's signature ("Sent from my iPhone", "Von meinem iPhone gesendet", "Get Outlook for iOS", …) and
  what follows it; a "-- " signature block near the end; mailing-list footers.
"""

import re

MAX_TEXT_CHARS = 32_768  # of a reply, what is read: its own text comes first
MAX_HEADER_LINE_CHARS = 300  # no attribution or header line is longer; longer lines are never taken for one
_LOOKBACK = 2  # an attribution wrapped over at most this many more lines above the one that ends it

_VERBS = (r"wrote|writes|sent|schrieb|geschrieben|a\s?écrit|écrit|escribió|escribio|ha\s?escrit|escreveu|"
          r"ha\s?scritto|scrisse|schreef|het\s?volgende\s?geschreven|napisał\(a\)|napisał|napisała|pisze|skrev|"
          r"kirjoitti|написал\(а\)|написал|написала|пишет|đã\s?viết|yazdı|写道|작성|のメッセージ")
# an attribution's last line ends with its verb (a colon after it, dashes around it as some clients draw it)
_ENDS_WITH_VERB = re.compile(rf"(?:^|[\s>\"')\]])(?:{_VERBS})\s?[:：]?\s?-*\s?$", re.IGNORECASE)
# or with the quoted sender's address and a colon (Gmail in languages without a verb, Yandex, mail.ru, Android)
_ENDS_WITH_ADDRESS = re.compile(r"(?:[<(]\s?[^<>()\s@]{1,100}@[^<>()\s@]{1,100}\s?[>)]|[^<>()\s@]{1,100}@[^<>()\s@]{1,100}|"
                                r"\])\s?[:：]\s?$")
_ENDS_WITH_BARE_ADDRESS = re.compile(r"<\s?[^<>\s@]{1,100}@[^<>\s@]{1,100}>\s?$")
_DATE_OR_TIME = re.compile(r"\d{1,2}[:.h]\d{2}|\b(?:19|20)\d{2}\b|\d{1,4}[./-]\d{1,2}[./-]\d{1,4}")
_OPENER = re.compile(r"^\s*(?:-+\s*)?(?:On|Am|Le|El|Em|Il|In\sdata|Op|W\sdniu|Dnia|Den|På|Vào|Quoting|Zitat|Citando|"
                     r"\d|[^\W\d]{2,9}\.?,\s?(?:\d|[^\W\d]{3,9}\.?\s\d)|[^\W\d]{1,4}\.?\s\d)", re.IGNORECASE)
# the verb inside: "Am 25.06.2015 um 10:55 schrieb Test user:"
_VERB_INSIDE = re.compile(rf"^\s*(?:Am|On|Le|El|Em|Il|Op)\s[^\n]{{0,200}}\s(?:{_VERBS})\s[^\n]{{0,200}}[:：]\s*$")
# "… wrote:" inside a line of the reply ("reply On Wed, Apr 4, 2012 at 3:59 PM, bob@example.com wrote:")
_INLINE_ATTRIBUTION = re.compile(r"(?:-{2,}\s*)?\bOn\s[^\n]{5,250}?\swrote:\s*$")

HEADER_FIELDS = (
    "from|sent|date|to|cc|subject|reply-to|de|envoyé|envoyé le|à|a|objet|copie à|date d'envoi|von|gesendet|an|"
    "betreff|datum|van|verzonden|aan|onderwerp|verstuurd|da|inviato|oggetto|data|inviato il|od|wysłano|wysłane|do|"
    "temat|dw|от|отправлено|кому|тема|дата|копия|para|enviado|enviada|asunto|assunto|fecha|cc|fra|sendt|til|emne|"
    "dato|från|skickat|till|ämne|lähettäjä|lähetetty|vastaanottaja|aihe|message du|on behalf of")
_HEADER_FIELD = re.compile(rf"^\s*[*>]?\s*\*?(?:{HEADER_FIELDS})\*?\s?[:：]", re.IGNORECASE)
_HEADER_FROM = re.compile(r"^\s*\*?(?:from|de|von|van|da|od|от|fra|från|lähettäjä|message du|date|datum|fecha)"
                          r"\*?\s?[:：]", re.IGNORECASE)
_HEADER_BLOCK_SPAN = 8  # a header block's second field comes within this many lines of its first

_SEPARATOR = re.compile(
    r"^\s*(?:[-=_*]{2,}\s*)?(?:original message|forwarded message|mensaje original|mensaje reenviado|"
    r"message d'origine|message transféré|message original|ursprüngliche nachricht|weitergeleitete nachricht|"
    r"messaggio originale|messaggio inoltrato|oorspronkelijk bericht|doorgestuurd bericht|wiadomość oryginalna|"
    r"oryginalna wiadomość|wiadomość przekazana dalej|mensagem original|mensagem encaminhada|исходное сообщение|"
    r"пересылаемое сообщение|oprindelig (?:besked|meddelelse)|ursprungligt meddelande|opprinnelig melding|"
    r"alkuperäinen viesti|begin forwarded message|anfang der weitergeleiteten nachricht|"
    r"début du message (?:réexpédié|transféré)|inicio del mensaje reenviado|inizio messaggio inoltrato|"
    r"início da mensagem encaminhada)\s*:?\s*(?:[-=_*]{2,})?\s*$", re.IGNORECASE)

_MOBILE_SIGNATURE = re.compile(
    r"^\s*(?:sent from|sent with|sent via|sent using|get outlook for|enviado desde|enviado con|enviado do|"
    r"enviado de|envoyé de|envoyé à partir d|envoyé depuis|envoyé avec|obtenir outlook pour|von meinem|"
    r"gesendet von|gesendet mit|"
    r"verzonden (?:vanaf|met|van)|verstuurd (?:vanaf|met|van)|inviato da|inviato con|scarica outlook per|"
    r"wysłane z|wysłano z|pobierz outlook|отправлено с|отправлено из|скачайте outlook|"
    r"skickat från|sendt fra|lähetetty)"
    r"[^,.;!?<>()\n]{0,50}(?:<https?://[^\s>]{1,200}>|\(https?://[^\s)]{1,200}\))?\s*$", re.IGNORECASE)
_SIGNATURE_DELIMITER = re.compile(r"^--\s?$")
_SIGNATURE_MAX_LINES = 12  # a "-- " block longer than this is not taken for a signature
_LIST_FOOTER = re.compile(r"^\s*(?:you received this (?:message|email) because you are subscribed|"
                          r"to unsubscribe from this group|to unsubscribe,? (?:send|visit|go to))", re.IGNORECASE)
_LIST_NAME = re.compile(r"^\s*\S{1,80} mailing list\s*$", re.IGNORECASE)  # under a rule: a list's footer
_RULE = re.compile(r"^\s*[-_=*~]{5,}\s*$")
_DECORATION = re.compile(r"^\s*[-_=*~]*\s*$")  # a blank line, or a rule drawn above what was cut
_CONTINUATION = re.compile(r"^\s*[^\s\dA-ZÀ-ÞА-Я]")  # a wrapped line's rest: not a capital, a digit or a blank
_QUOTED = re.compile(r"^\s*>(?!\s*[:：]\s*$)")  # not ">:", the end of an address wrapped in an attribution
_INVISIBLE = re.compile("[\u200b\u200c\u200e\u200f\ufeff]")


def _quoted(line: str) -> bool:
    return bool(_QUOTED.match(line))


def _next_filled(lines: list[str], start: int) -> int:
    while start < len(lines) and not lines[start].strip():
        start += 1
    return start


def _attribution_start(lines: list[str], end: int) -> int | None:
    """Where the attribution that ends on line `end` starts, or None when no attribution ends there."""
    line = " ".join(lines[end].split())  # runs of blanks as one: no expression here backtracks over a run
    if not line or len(lines[end]) > MAX_HEADER_LINE_CHARS or _quoted(line) or not (
            line.endswith((":", "：", "-", ">")) or _ENDS_WITH_VERB.search(line)):
        return None
    after = _next_filled(lines, end + 1)
    quote_follows = after < len(lines) and _quoted(lines[after])
    best = None
    for start in range(end, max(-1, end - _LOOKBACK - 1), -1):
        if start < end and (not lines[start].strip() or len(lines[start]) > MAX_HEADER_LINE_CHARS
                            or _quoted(lines[start])):
            break
        window = " ".join(" ".join(lines[start:end + 1]).split())
        dated, addressed = bool(_DATE_OR_TIME.search(window)), "@" in window
        if _ENDS_WITH_VERB.search(window):
            accepted = dated or addressed or window.startswith("-")
        elif _ENDS_WITH_ADDRESS.search(window) or (quote_follows and _ENDS_WITH_BARE_ADDRESS.search(window)):
            accepted = dated and addressed
        else:
            accepted = bool(_VERB_INSIDE.match(window)) and dated
        if accepted and (start == end or _OPENER.match(window)):
            best = start
    return best


def _header_block_at(lines: list[str], index: int) -> bool:
    """Whether a header block ("From: …", then "Sent: …" or "To: …" within a few lines) starts on line `index`."""
    if len(lines[index]) > MAX_HEADER_LINE_CHARS or not _HEADER_FROM.match(lines[index]):
        return False
    return any(_HEADER_FIELD.match(line) and len(line) <= MAX_HEADER_LINE_CHARS
               for line in lines[index + 1:index + 1 + _HEADER_BLOCK_SPAN])


def _skip_quote(lines: list[str], index: int) -> int:
    """The line after the quoted block starting at `index`; a line that a long link or a client's wrapping broke out
    of the block (quoted lines right above and below it, and it starts as no sentence does) is part of it."""
    while index < len(lines):
        if _quoted(lines[index]):
            index += 1
        elif (_CONTINUATION.match(lines[index]) and index + 1 < len(lines) and _quoted(lines[index + 1])
              and index > 0 and _quoted(lines[index - 1])):
            index += 1
        else:
            return index
    return index


def _cut_history(lines: list[str]) -> list[str]:
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if _quoted(line):
            index = _skip_quote(lines, index)
            continue
        if _SEPARATOR.match(line) or _header_block_at(lines, index):
            break
        inline = _INLINE_ATTRIBUTION.search(line) if len(line) <= MAX_HEADER_LINE_CHARS else None
        if inline and line[:inline.start()].strip() and _DATE_OR_TIME.search(inline.group()):
            kept.append(line[:inline.start()])
            index = _next_filled(lines, index + 1)
            if index < len(lines) and _quoted(lines[index]):
                continue
            break
        start = _attribution_start(lines, index)
        if start is not None:
            del kept[len(kept) - (index - start):]
            after = _next_filled(lines, index + 1)
            if after < len(lines) and _quoted(lines[after]):  # a quote under it: the reply may go on below
                index = after
                continue
            break
        kept.append(line)
        index += 1
    return kept


def _cut_signatures(lines: list[str]) -> list[str]:
    filled_below = [0] * (len(lines) + 1)  # non-blank lines from each line to the end
    for index in range(len(lines) - 1, -1, -1):
        filled_below[index] = filled_below[index + 1] + bool(lines[index].strip())
    for index, line in enumerate(lines):
        if _MOBILE_SIGNATURE.match(line) or _LIST_FOOTER.match(line):
            return lines[:index]
        if _LIST_NAME.match(line) and index > 0 and _RULE.match(lines[index - 1]):
            return lines[:index]
        if _SIGNATURE_DELIMITER.match(line.strip()) and filled_below[index] <= _SIGNATURE_MAX_LINES:
            return lines[:index]
    return lines


def cut_text(text: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The reply's own text in a text/plain body (see the module's docstring for what is cut)."""
    text = _INVISIBLE.sub("", text.replace("\r\n", "\n").replace("\r", "\n")[:max_chars])
    lines = _cut_signatures(_cut_history(text.split("\n")))
    while lines and _DECORATION.match(lines[-1]):
        lines.pop()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in lines)).strip()
