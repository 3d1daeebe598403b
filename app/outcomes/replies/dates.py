"""The return date an out-of-office reply states, in the languages the classifier reads."""

import re
from datetime import date, datetime, timedelta

_MONTHS = {
    1: "january jan enero janvier januar janner janeiro gennaio januari stycznia styczen sty",
    2: "february feb febrero fevrier februar fevereiro febbraio februari lutego luty lut",
    3: "march mar marzo mars marz marco maart marca marzec",
    4: "april apr abril avril aprile kwietnia kwiecien kwi",
    5: "may mayo mai maio maggio mei maja maj",
    6: "june jun junio juin juni junho giugno czerwca czerwiec cze",
    7: "july jul julio juillet juli julho luglio lipca lipiec lip",
    8: "august aug agosto aout augustus sierpnia sierpien sie",
    9: "september sep sept septiembre setiembre septembre setembro settembre wrzesnia wrzesien wrz",
    10: "october oct octubre octobre oktober outubro ottobre pazdziernika pazdziernik paz okt",
    11: "november nov noviembre novembre novembro listopada listopad lis",
    12: "december dec diciembre decembre dezember dezembro dicembre grudnia grudzien gru dez",
}
_MONTH_OF = {name: month for month, names in _MONTHS.items() for name in names.split()}
_MONTH = "|".join(sorted(_MONTH_OF, key=len, reverse=True))
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th|er|o|º)?\.?\s?(?:de |of )?({_MONTH})\b\.?(?:,?\s(?:de )?(\d{{4}}))?")
_MONTH_DAY = re.compile(rf"\b({_MONTH})\.?\s(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s(\d{{4}}))?")
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_NUMERIC = re.compile(r"(?<![\d:])(\d{1,2})[./](\d{1,2})(?:[./](\d{4}|\d{2})\b|\.?(?![\d:]))")
_WEEKDAYS = [
    "monday lunes lundi montag segunda lunedi maandag poniedzialek",
    "tuesday martes mardi dienstag terca martedi dinsdag wtorek",
    "wednesday miercoles mercredi mittwoch quarta mercoledi woensdag sroda",
    "thursday jueves jeudi donnerstag quinta giovedi donderdag czwartek",
    "friday viernes vendredi freitag sexta venerdi vrijdag piatek",
    "saturday sabado samedi samstag sabato zaterdag sobota",
    "sunday domingo dimanche sonntag domenica zondag niedziela",
]
_WEEKDAY_OF = {name: index for index, names in enumerate(_WEEKDAYS) for name in names.split()}
_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAY_OF) + r")\b")
_TOMORROW = re.compile(r"\b(tomorrow|manana|demain|morgen|amanha|domani|jutro)\b")


def _dated(year: int | None, month: int, day: int, received: date) -> date | None:
    try:
        if year is not None:
            return date(year + 2000 if year < 100 else year, month, day)
        found = date(received.year, month, day)
    except ValueError:
        return None
    return found if found >= received - timedelta(days=30) else found.replace(year=received.year + 1)


def return_date(folded_text: str, received_at: datetime) -> date | None:
    """The latest date on or after the day the reply came (an away notice names its last day away or its first day
    back, and the later of the two when it names both), a named weekday or "tomorrow" counted from that day; None
    when the text states none. A numeric date that reads both ways (12/07) is the nearer of the two."""
    received = received_at.date()
    found: list[date] = []
    for match in _ISO.finditer(folded_text):
        found.append(_dated(int(match[1]), int(match[2]), int(match[3]), received))
    for match in _DAY_MONTH.finditer(folded_text):
        found.append(_dated(int(match[3]) if match[3] else None, _MONTH_OF[match[2]], int(match[1]), received))
    for match in _MONTH_DAY.finditer(folded_text):
        found.append(_dated(int(match[3]) if match[3] else None, _MONTH_OF[match[1]], int(match[2]), received))
    for match in _NUMERIC.finditer(folded_text):
        first, second, year = int(match[1]), int(match[2]), int(match[3]) if match[3] else None
        readings = [day for day in (_dated(year, second, first, received), _dated(year, first, second, received))
                    if day is not None and day >= received]
        if readings:  # 12/07 read both ways: an away notice names a day soon, so the nearer
            found.append(min(readings))
    dates = [day for day in found if day is not None and day >= received]
    if dates:
        return max(dates)
    weekday = _WEEKDAY.search(folded_text)
    if weekday:
        ahead = (_WEEKDAY_OF[weekday[1]] - received.weekday()) % 7 or 7
        return received + timedelta(days=ahead)
    if _TOMORROW.search(folded_text):
        return received + timedelta(days=1)
    return None
