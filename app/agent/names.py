"""How to greet a person from their name as a CRM holds it.

"Dr. Priya Nair", "Mr. John Smith", "Schmidt, Anna", "JOHN SMITH" and "van der Berg, Jan" are read by `nameparser`
(honorifics, "Last, First", particles, capitals). Names written family name first are recognised by their family
name where the written order says so: Vietnamese ("Nguyễn Thị Lan": greeted "Lan", the given name comes last),
Chinese ("Wang Xiuying": "Xiuying"), Korean ("Kim Min-jun": "Min-jun"), Hungarian ("Nagy László": "László") and
Japanese ("Tanaka Hiroshi": no given-name greeting, which would be too familiar; "Tanaka" with an honorific when one
is written). A given `first_name` wins over all of it. When the order cannot be told (both parts are family names, a
script other than Latin, an initial, a team's mailbox), the greeting has no name rather than a wrong one.
"""

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from nameparser import HumanName

# Honorifics a greeting may use ("Dear Dr. Nair,"), as written in English correspondence.
_HONORIFICS = {"dr": "Dr.", "mr": "Mr.", "mrs": "Mrs.", "ms": "Ms.", "miss": "Miss", "mx": "Mx.", "prof": "Prof.",
               "professor": "Prof.", "sir": "Sir", "dame": "Dame"}
_NOT_A_PERSON = frozenset("team sales support info admin office department accounts contact hello enquiries inquiries "
                          "marketing billing procurement hr noreply".split())

# Family names that open a name written family name first. Lists of the most common names of each country (each
# covers most of its population); a name is only read family-first when the rest of it does not also look like a
# family name.
_VIETNAMESE = frozenset("nguyen tran le pham hoang huynh phan vu vo dang bui do ho ngo duong ly dinh trinh truong "
                        "lam mai cao luong".split())
_VIETNAMESE_MIDDLE = frozenset("thi van duc ngoc huu minh thanh quoc xuan kim hoai".split())
_CHINESE = frozenset("wang li zhang liu chen yang huang zhao wu zhou xu sun ma zhu hu guo he gao lin luo zheng liang "
                     "xie song tang han feng deng cao peng zeng xiao tian dong yuan pan cai jiang yu du ye cheng wei su "
                     "lu ding ren shen yao zhong jin cui tan fan fu qian qin".split())
_KOREAN = frozenset("kim lee yi park pak choi choe jung jeong chung kang cho jo yoon yun jang chang lim im han oh seo "
                    "shin kwon hwang ahn an song yoo ryu hong jeon moon yang son bae baek heo nam".split())
_JAPANESE = frozenset("sato suzuki takahashi tanaka watanabe ito yamamoto nakamura kobayashi kato yoshida yamada "
                      "sasaki yamaguchi matsumoto inoue kimura hayashi shimizu saito yamazaki mori abe ikeda hashimoto "
                      "ishikawa ogawa fujita okada goto hasegawa murakami kondo ishii sakamoto endo aoki fujii nishimura "
                      "fukuda ota miura okamoto matsuda nakagawa nakano harada ono tamura takeuchi kaneko wada "
                      "nakayama ishida ueda morita hara shibata sakai kudo yokoyama miyazaki miyamoto uchida takagi "
                      "ando taniguchi ohno maruyama imai takada fujiwara takeda murata ueno sugiyama masuda".split())
_HUNGARIAN = frozenset("nagy kovacs toth szabo horvath varga kiss molnar nemeth farkas balogh papp takacs juhasz "
                       "lakatos meszaros olah simon racz fekete szilagyi torok feher balazs gal kis szucs kocsis orsos "
                       "pinter fodor szalai sipos magyar lukacs gulyas biro kiraly katona laszlo jakab bogdan balog "
                       "sandor boros fazekas kelemen antal orosz somogyi fulop veres budai vincze hegedus deak pap "
                       "balint illes pal vass szoke fabian vida".split())
_HUNGARIAN_GIVEN = frozenset("laszlo istvan jozsef janos zoltan sandor gabor ferenc attila peter tamas zsolt tibor "
                             "andras csaba imre lajos gyorgy balazs gyula mihaly robert karoly adam daniel krisztian "
                             "maria erzsebet katalin eva ilona anna zsuzsanna margit judit agnes julianna andrea "
                             "erika krisztina ildiko szilvia timea eszter zsofia reka anita edit noemi orsolya".split())
_HUNGARIAN_LETTERS = frozenset("őűŐŰ")


@dataclass(frozen=True)
class Addressee:
    """How an email may greet someone: `given` informally ("Priya"), `formal` with an honorific ("Dr. Nair"); either is
    None when the name does not say it for sure."""

    given: str | None = None
    formal: str | None = None


def _fold(word: str) -> str:
    """Lower case without accents: "Nguyễn" → "nguyen", "Kovács" → "kovacs"."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower().replace("đ", "d")) if not unicodedata.combining(c))


def _latin(text: str) -> bool:
    return all(not c.isalpha() or "LATIN" in unicodedata.name(c, "") for c in text)


def _initial(word: str) -> bool:
    return len(word.rstrip(".")) <= 1


def _cased(word: str) -> str:
    """A word as names are written: "JOHN" and "john" → "John", "jean-pierre" → "Jean-Pierre"; a word with mixed
    capitals ("McDonald", "DeShawn") as written."""
    if word.isupper() or word.islower():
        return re.sub(r"[^\W\d_]+", lambda m: m.group(0)[:1].upper() + m.group(0)[1:].lower(), word)
    return word


def _honorific(text: str) -> str | None:
    for word in text.replace(",", " ").split():
        if found := _HONORIFICS.get(word.lower().rstrip(".")):
            return found
    return None


def _without_honorifics(text: str) -> str:
    return " ".join(w for w in text.split() if w.lower().rstrip(".") not in _HONORIFICS)


def _family_first(words: list[str]) -> tuple[str, str | None] | None:
    """(family name, given name to greet by or None) for a name written family name first; None when the name is not
    (or not surely) in that order."""
    folded = [_fold(w) for w in words]
    first, rest, last = folded[0], folded[1:], folded[-1]
    text = " ".join(words)
    if first in _VIETNAMESE and (any(m in _VIETNAMESE_MIDDLE for m in rest[:-1]) or text != _fold(text)) \
            and last not in _VIETNAMESE:
        return words[0], words[-1]
    if first in _KOREAN and len(words) == 2 and "-" in words[1] and last not in _KOREAN:
        return words[0], words[1]
    if first in _HUNGARIAN and len(words) == 2 and first not in _HUNGARIAN_GIVEN and (
            last in _HUNGARIAN_GIVEN or (set(text) & _HUNGARIAN_LETTERS and last not in _HUNGARIAN)):
        return words[0], words[1]
    if first in _JAPANESE and last not in _JAPANESE and len(words) == 2:
        return words[0], None
    if first in _CHINESE and all(w not in _CHINESE and w not in _KOREAN for w in rest) and len(words) in (2, 3) \
            and all(re.fullmatch(r"[a-z]+(?:-[a-z]+)?", w) for w in rest):
        return words[0], " ".join(words[1:])
    return None


def _ambiguous_order(words: list[str]) -> bool:
    """A name of two family names of the cultures above ("Li Wei", "Lee Kim"): either part could be the given one."""
    folded = [_fold(w) for w in words]
    east = _VIETNAMESE | _CHINESE | _KOREAN | _JAPANESE
    return len(words) >= 2 and folded[0] in east and folded[-1] in east


@lru_cache(maxsize=1 << 12)
def addressee(name: str | None, first_name: str | None = None, last_name: str | None = None) -> Addressee:
    """How to greet the person named: a given `first_name` wins; else the name is read (see the module). Cached: the
    policy, the composer and the judge each read the same prospect's name on every turn."""
    full = " ".join(p for p in (name or "",) if p).strip() or " ".join(p for p in (first_name, last_name) if p)
    honorific = _honorific(full) or _honorific(first_name or "")
    if not full or any(c.isdigit() or c in "@/" for c in full) or set(_fold(full).split()) & _NOT_A_PERSON:
        return Addressee()
    if not _latin(full + (first_name or "")):
        return Addressee()
    family = _cased(last_name.strip()) if last_name and last_name.strip() else None
    given = None
    if first_name and first_name.strip():
        stripped = _without_honorifics(first_name.strip())
        given = _cased(stripped) if stripped and not _initial(stripped) and "," not in stripped else None
    elif "," in full:  # "Last, First": the order is written out
        parsed = HumanName(full)
        given = _cased(parsed.first) if parsed.first and not _initial(parsed.first) else None
        family = family or (_cased(parsed.last) if parsed.last else None)
    else:
        words = _without_honorifics(full).split()
        order = _family_first(words) if len(words) >= 2 else None
        if order is not None:
            family_name, given_name = order
            family = family or _cased(family_name)
            given = _cased(given_name) if given_name else None
        elif _ambiguous_order(words):
            given = None
        else:
            parsed = HumanName(full)
            given = _cased(parsed.first) if parsed.first and not _initial(parsed.first) else None
            family = family or (_cased(parsed.last) if parsed.last else None)
    if family is None and honorific:
        parsed = HumanName(full)
        family = _cased(parsed.last) if parsed.last and not _initial(parsed.last) else None
    formal = f"{honorific} {family}" if honorific and family else None
    return Addressee(given=given, formal=formal)


def greeting(tone: str, who: Addressee) -> str:
    """The greeting line for a tone: "Dear Dr. Nair," (formal, with an honorific), "Dear Priya,", "Hi Priya,",
    "Priya,"; without a name when none is sure ("Hello,", "Hi there,")."""
    if tone == "formal":
        name = who.formal or who.given
        return f"Dear {name}," if name else "Hello,"
    if tone == "friendly":
        name = who.given or who.formal
        return f"Hi {name}," if name else "Hi there,"
    name = who.given or who.formal
    return f"{name}," if name else "Hello,"


def of_prospect(prospect: dict) -> Addressee:
    """The addressee of a prospect as the agent sees it (`name`, and `first_name` when the CRM gave one)."""
    return addressee(str(prospect.get("name") or ""), prospect.get("first_name"), prospect.get("last_name"))
