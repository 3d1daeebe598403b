"""Prospects in and drafts out as CSV, in the columns sales tools use.

Import reads what a CRM or a sequencer exports: its header names are matched to prospect fields whatever their case,
spacing or camelCase (`First Name`, `first_name`, `firstName`), `,`, `;` or tab separated, UTF-8 (with or without a
BOM), UTF-16 with a BOM, or Windows-1252. A column that names no prospect field is kept as a custom field and comes
back in the export under the same name.

Export writes one row per draft in the default columns or a sequencer's documented ones (`Layout`), and escapes every
cell a spreadsheet would read as a formula (OWASP's CSV injection advice): a leading `'`.
"""

import codecs
import csv
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from app.drafts.schemas import ALIASES
from app.kit.errors import invalid

MAX_CSV_BYTES = 15 * 1024 * 1024  # 1,000 prospects with every documented field at its longest, in Latin text (13.6 MB)
MAX_ROWS_ERRORS = 50
DELIMITERS = (",", ";", "\t")

# ---------------------------------------------------------------- import: header names

# A header is matched by its key: lower case, runs of anything but letters and digits as one `_`, camelCase split.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "prospect_id", "lead_id", "crm_id"),
    "email": ("email", "email_address", "e_mail", "mail", "emailaddress"),
    "first_name": ("first_name", "firstname", "given_name", "fname", "forename"),
    "last_name": ("last_name", "lastname", "surname", "family_name", "lname", "familyname"),
    "name": ("name", "full_name", "fullname", "contact_name"),
    "title": ("title", "role", "job_title", "jobtitle", "position", "designation"),
    "company_name": ("company", "company_name", "companyname", "organization", "organisation", "account_name"),
    "industry": ("industry",),
    "pains": ("pains", "pain_points", "painpoints"),
    "goal": ("goal",),
}
FIELD_OF_KEY = {alias: field for field, aliases in FIELD_ALIASES.items() for alias in aliases}
PAIN_SEPARATORS = re.compile(r"[;|\n]")


def header_key(header: str) -> str:
    """`First Name`, `first_name`, `firstName` and `FIRST-NAME` are all `first_name`."""
    split = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", header.strip())
    return re.sub(r"[^a-z0-9]+", "_", split.lower()).strip("_")


def decode(data: bytes) -> str:
    """The file's text: UTF-16 or UTF-8 when a BOM says so, else UTF-8, else Windows-1252 (what Excel writes)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise invalid("file", "the CSV file starts with a UTF-16 byte order mark but is not UTF-16 text") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        raise invalid("file", "the CSV file is neither UTF-8 nor Windows-1252 text: save it as CSV UTF-8") from None


def sniff_delimiter(header_line: str) -> str:
    """The separator that splits the header into the most columns (`,` on a tie): a header holds no quoted
    separators in practice, and counting them beats csv.Sniffer, which guesses wrong on short files."""
    counts = [(len(next(csv.reader([header_line], delimiter=d), [])), -rank, d) for rank, d in enumerate(DELIMITERS)]
    return max(counts)[2]


@dataclass(frozen=True)
class Columns:
    """What each column of a file holds: a prospect field, or a custom field under the header's own name."""

    fields: dict[int, str]  # column index → prospect field
    custom: dict[int, str]  # column index → custom field name (the header as written)
    ignored: frozenset[int]  # unnamed columns: their cells must be empty


def read_header(header: list[str]) -> Columns:
    """Each column's meaning; a 422 naming the columns that share a name. Two names for one field (`company` and
    `company_name`, as the default export writes) are both read: a row must not give them different values."""
    fields: dict[int, str] = {}
    custom: dict[int, str] = {}
    ignored: set[int] = set()
    by_name: dict[str, list[str]] = {}
    for index, raw in enumerate(header):
        name = raw.strip()
        if not name:
            ignored.add(index)
            continue
        by_name.setdefault(name.lower(), []).append(name)
        field = FIELD_OF_KEY.get(header_key(name))
        if field:
            fields[index] = field
        else:
            custom[index] = name
    repeated = [names for names in by_name.values() if len(names) > 1]
    if repeated:
        raise invalid("file", "line 1: the header names " + "; ".join(
            f"{names[0]!r} {len(names)} times" for names in repeated) + ": each column needs a name of its own")
    if not fields:
        shown = ", ".join(repr(h) for h in header[:6]) + (", …" if len(header) > 6 else "")
        raise invalid("file", f"line 1: the header names no prospect column (found {shown}). Expected a header row "
                              "with first_name and last_name (or name), title (or role), company (or company_name), "
                              "industry, pains, email, separated by , or ; or a tab")
    return Columns(fields, custom, frozenset(ignored))


# ---------------------------------------------------------------- import: rows


class RowError(ValueError):
    """A row the file's own columns contradict; the message names the columns."""


def prospect_of(values: list[str], header: list[str], columns: Columns) -> dict:
    """One row as the prospect JSON POST /drafts takes: empty cells left out, pains split on `;` (or `|`, or line
    breaks), the other columns under `custom`."""
    cells: dict[str, dict[str, str]] = {}  # field → {column: value} of its non-empty cells
    for index, field in columns.fields.items():
        cell = values[index].strip() if index < len(values) else ""
        if cell:
            cells.setdefault(field, {})[header[index].strip()] = cell
    prospect: dict = {}
    for field, given in cells.items():
        if len(set(given.values())) > 1:
            raise RowError(f"columns {' and '.join(map(repr, given))} give different values for the {field}")
        [cell] = set(given.values())
        prospect[field] = [p.strip() for p in PAIN_SEPARATORS.split(cell) if p.strip()] if field == "pains" else cell
    prospect.setdefault("pains", [])
    custom = {name: values[index].strip() for index, name in columns.custom.items()
              if index < len(values) and values[index].strip()}
    if custom:
        prospect["custom"] = custom
    return prospect


def prospects_from_csv(data: bytes, model: type[BaseModel], max_rows: int) -> list[BaseModel]:
    """The rows of a sales tool's export, each validated by `model` (the batch's prospect schema: the instances, which
    keep what validation says it cleaned). A bad row is a 422 naming its line (the header is line 1) and the column as
    the file names it."""
    if len(data) > MAX_CSV_BYTES:
        raise invalid("file", f"the CSV file is {len(data) / 1048576:.1f} MiB, over the {MAX_CSV_BYTES // 1048576} MiB "
                              f"a batch of {max_rows} prospects takes: split it into smaller batches")
    text = decode(data)
    if "\x00" in text:
        raise invalid("file", "the CSV file holds a NUL character: is it a spreadsheet (.xlsx) rather than CSV?")
    delimiter = sniff_delimiter(next(iter(text.lstrip("\ufeff").splitlines()), ""))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    rows, errors = [], []
    try:
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise invalid("file", "the CSV file is empty: it needs a header row, then one row per prospect")
        columns = read_header(header)
        names = {field: header[index].strip() for index, field in columns.fields.items()}
        names |= {ALIASES[field]: name for field, name in names.items() if field in ALIASES}  # as the model names them
        for values in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in values):
                continue  # a blank line
            if len(rows) >= max_rows:
                raise invalid("file", f"the CSV file has over {max_rows} prospects; split it into batches")
            extra = [v for index, v in enumerate(values) if index >= len(header) or index in columns.ignored]
            if any(v.strip() for v in extra):
                errors.append(_row_error(line, None, f"more fields than the header names ({len(values)} against "
                                                     f"{len(header)}): is a value holding a {delimiter!r} unquoted?"))
                continue
            try:
                rows.append(model.model_validate(prospect_of(values, header, columns)))
            except RowError as exc:
                errors.append(_row_error(line, None, str(exc)))
            except ValidationError as exc:
                errors += [_row_error(line, _column_named(e["loc"], names), e["msg"].removeprefix("Value error, "))
                           for e in exc.errors()]
            if len(errors) >= MAX_ROWS_ERRORS:
                break
    except csv.Error as exc:
        raise invalid("file", f"line {reader.line_num}: {exc}") from None
    if errors:
        raise RequestValidationError(errors[:MAX_ROWS_ERRORS])
    if not rows:
        raise invalid("file", "the CSV file has a header but no prospect rows")
    return rows


def _column_named(loc: tuple, names: Mapping[str, str]) -> str | None:
    """The column of the file an error is about: the header it had, or the custom field's own name."""
    if not loc:
        return None
    if loc[0] == "custom" and len(loc) > 1:
        return str(loc[1])
    return names.get(str(loc[0]), str(loc[0]))


def _row_error(line: int, column: str | None, message: str) -> dict:
    return {"loc": ("body", "file", f"line {line}", *([column] if column else [])), "type": "value_error",
            "msg": f"line {line}{f', {column}' if column else ''}: {message}"}


# ---------------------------------------------------------------- export


class Layout(StrEnum):
    """Whose column names the export uses."""

    CODREAMER = "codreamer"
    INSTANTLY = "instantly"
    SMARTLEAD = "smartlead"
    LEMLIST = "lemlist"


# The export's own columns, in order (`suppressed`: the reason a prospect's address is suppressed, its subject and
# body then empty). A sequencer's layout renames those it documents; the rest travel as custom
# variables (Instantly), custom fields (Smartlead) or custom variables (lemlist) under these names.
BASE_COLUMNS = ("prospect_id", "email", "first_name", "last_name", "name", "company_name", "company", "title", "role",
                "industry", "subject", "body", "fit", "fit_reason", "judge_score", "policy", "codreamer_ref",
                "message_id", "suppressed")
# Documented lead fields: Instantly's lead (developer.instantly.ai, API v2 `POST /leads`, also its CSV import's
# names), Smartlead's lead import (api.smartlead.ai, `lead_list` items), lemlist's lead object
# (developer.lemlist.com, objects-definitions/lead and `POST /campaigns/{id}/leads`).
LAYOUT_NAMES: dict[Layout, dict[str, str]] = {
    Layout.CODREAMER: {},
    Layout.INSTANTLY: {"email": "email", "first_name": "first_name", "last_name": "last_name",
                       "company_name": "company_name", "title": "job_title", "phone": "phone", "website": "website",
                       "personalization": "personalization"},
    Layout.SMARTLEAD: {"email": "email", "first_name": "first_name", "last_name": "last_name",
                       "company_name": "company_name", "phone": "phone_number", "website": "website",
                       "location": "location", "linkedin": "linkedin_profile", "company_url": "company_url"},
    Layout.LEMLIST: {"email": "email", "first_name": "firstName", "last_name": "lastName", "company_name": "companyName",
                     "title": "jobTitle", "phone": "phone", "linkedin": "linkedinUrl", "company_domain": "companyDomain",
                     "personalization": "icebreaker", "timezone": "timezone"},
}
# In a sequencer's layout, the duplicates kept in the default for older imports are left out.
LAYOUT_SKIPS = {"name", "company", "role"}
# Custom columns that are a documented field of one tool or another: carried across layouts under each tool's name.
CUSTOM_CONCEPTS: dict[str, tuple[str, ...]] = {
    "phone": ("phone", "phone_number", "phonenumber", "mobile"),
    "website": ("website", "company_website"),
    "company_url": ("company_url",),
    "location": ("location",),
    "linkedin": ("linkedin", "linkedin_url", "linkedin_profile", "linked_in", "linked_in_url", "linked_in_profile"),
    "company_domain": ("company_domain", "companydomain", "domain"),
    "personalization": ("personalization", "icebreaker"),
    "timezone": ("timezone", "time_zone"),
}
CONCEPT_OF_KEY = {alias: concept for concept, aliases in CUSTOM_CONCEPTS.items() for alias in aliases}
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape_formula(cell: str) -> str:
    """A cell a spreadsheet would evaluate (`=`, `+`, `-`, `@`, a tab or a carriage return first), with a leading `'`
    that makes it text (OWASP, CSV injection)."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


@dataclass(frozen=True)
class ExportRow:
    """One draft as the export reads it: the base columns' values and the prospect's custom fields."""

    values: dict[str, str]
    custom: dict[str, str]


def export_header(layout: Layout, custom_names: Iterable[str]) -> list[tuple[str, str]]:
    """(column, source) pairs: the column's name in the layout, and the base column or `custom:<name>` it reads."""
    renames = LAYOUT_NAMES[layout]
    columns: list[tuple[str, str]] = []
    for base in BASE_COLUMNS:
        if layout is not Layout.CODREAMER and base in LAYOUT_SKIPS:
            continue
        columns.append((renames.get(base, base), base))
    taken = {name for name, _ in columns}
    for name in custom_names:
        concept = CONCEPT_OF_KEY.get(header_key(name))
        column = renames.get(concept, name) if concept else name
        if column in taken:  # a custom column named like a column of the export: kept under a prefixed name
            column = f"custom_{name}"
        taken.add(column)
        columns.append((column, f"custom:{name}"))
    return columns


def choose_columns(header: list[tuple[str, str]], wanted: list[str] | None) -> list[tuple[str, str]]:
    """The columns asked for with `?columns=`, in that order; a 422 naming the unknown ones and the choice."""
    if not wanted:
        return header
    by_name = {pair[0]: pair for pair in header}
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        raise _query_error(f"unknown column(s) {', '.join(map(repr, unknown))}; this export has {', '.join(by_name)}")
    repeated = sorted({name for name in wanted if wanted.count(name) > 1})
    if repeated:
        raise _query_error(f"column(s) {', '.join(map(repr, repeated))} asked for twice")
    return [by_name[name] for name in wanted]


def _query_error(message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("query", "columns"), "msg": message, "type": "value_error"}])


def write_csv(rows: list[ExportRow], layout: Layout = Layout.CODREAMER, columns: list[str] | None = None) -> str:
    """Every row in the layout's columns (or those asked for), every cell formula-escaped; custom columns in the
    order they first appear."""
    custom_names: dict[str, None] = {}
    for row in rows:
        custom_names.update(dict.fromkeys(row.custom))
    header = choose_columns(export_header(layout, custom_names), columns)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180
    writer.writerow([escape_formula(name) for name, _ in header])
    for row in rows:
        writer.writerow([escape_formula(row.custom.get(source[7:], "") if source.startswith("custom:")
                                        else row.values.get(source, "")) for _, source in header])
    return out.getvalue()
