"""CSV in and out as sales tools speak it: each tool's documented export imports with no edits, the export writes each
tool's documented column names, and no cell starts a formula (tests/data holds the files)."""

import csv
import io
from pathlib import Path

import pytest
from fastapi.exceptions import RequestValidationError

from app.drafts import csv_files, service
from app.drafts.csv_files import ExportRow, Layout, escape_formula, header_key, sniff_delimiter, write_csv

DATA = Path(__file__).resolve().parents[1] / "data"
# Each tool's documented lead fields (see app/drafts/csv_files.py for the sources): the export may use only these
# names for the prospect's standard fields; everything else travels as the tool's custom variables/fields.
DOCUMENTED = {
    Layout.INSTANTLY: {"email", "first_name", "last_name", "company_name", "job_title", "phone", "website",
                       "personalization"},
    Layout.SMARTLEAD: {"email", "first_name", "last_name", "company_name", "phone_number", "website", "location",
                       "linkedin_profile", "company_url"},
    Layout.LEMLIST: {"email", "firstName", "lastName", "companyName", "jobTitle", "phone", "linkedinUrl",
                     "companyDomain", "icebreaker", "timezone"},
}
FILES = {Layout.INSTANTLY: "instantly_leads.csv", Layout.SMARTLEAD: "smartlead_leads.csv",
         Layout.LEMLIST: "lemlist_leads.csv"}


def imported(data: bytes) -> list[dict]:
    return [prospect.model_dump(exclude_none=True) for prospect in service.prospects_from_csv(data)]


def errors_of(data: bytes) -> str:
    with pytest.raises(RequestValidationError) as caught:
        imported(data)
    return " | ".join(e["msg"] for e in caught.value.errors())


def as_rows(prospects: list[dict]) -> list[ExportRow]:
    """What the export reads of a stored draft (service._export_row's base columns), with a written email."""
    return [ExportRow(values={"prospect_id": f"p{i}", "email": p.get("email", ""), "first_name": p.get("first_name", ""),
                              "last_name": p.get("last_name", ""), "name": p["name"], "company_name": p["company"],
                              "company": p["company"], "title": p.get("role", ""), "role": p.get("role", ""),
                              "industry": p.get("industry", ""), "subject": f"For {p['company']}", "body": "Hello",
                              "codreamer_ref": f"eml_{i}", "message_id": f"<eml_{i}@x>"}, custom=p.get("custom", {}))
            for i, p in enumerate(prospects, start=1)]


@pytest.mark.parametrize("layout", list(FILES))
def test_each_tools_documented_export_imports_with_no_edits(layout):
    prospects = imported((DATA / FILES[layout]).read_bytes())
    assert len(prospects) == 2
    first = prospects[0]
    assert first["first_name"] and first["last_name"] and first["email"] and first["company"] and first["role"]
    assert first["name"] == f"{first['first_name']} {first['last_name']}"
    assert first["pains"] == []  # none in a sequencer's file: the role (or industry) is what the draft is written to
    assert first["custom"]  # the tool's other columns, kept


def test_the_lemlist_file_is_semicolons_in_windows_1252_with_camel_case_names():
    jose, anna = imported((DATA / "lemlist_leads.csv").read_bytes())
    assert (jose["first_name"], jose["last_name"], jose["company"]) == ("José", "Núñez", "Café Lisboa")
    assert jose["industry"] == "food and beverage" and anna["role"] == "Werksleiterin"
    assert jose["custom"] == {"linkedinUrl": "https://www.linkedin.com/in/jose-example",
                              "companyDomain": "cafe-lisboa.example", "icebreaker": "Loved the new roastery"}


@pytest.mark.parametrize("layout", list(FILES))
def test_the_export_uses_each_tools_documented_names_and_imports_back(layout):
    prospects = imported((DATA / FILES[layout]).read_bytes())
    written = write_csv(as_rows(prospects), layout)
    header = next(csv.reader(io.StringIO(written)))
    standard = {name for name in header if header_key(name) in csv_files.FIELD_OF_KEY
                or header_key(name) in csv_files.CONCEPT_OF_KEY}
    assert standard - {"prospect_id", "industry", "title"} <= DOCUMENTED[layout], standard - DOCUMENTED[layout]
    own_header = (DATA / FILES[layout]).read_bytes().decode("cp1252").splitlines()[0]
    own_columns = next(csv.reader([own_header], delimiter=sniff_delimiter(own_header)))
    assert set(own_columns) <= set(header), set(own_columns) - set(header)  # what the tool exported, by its own names
    assert {"subject", "body", "codreamer_ref", "message_id"} <= set(header)
    again = imported(written.encode())  # and the export is itself a file the service takes
    assert [(p["name"], p["company"], p["custom"].get("subject")) for p in again] == [
        (p["name"], p["company"], f"For {p['company']}") for p in prospects]
    default = imported(write_csv(as_rows(prospects)).encode())  # the default layout's too
    assert [(p["name"], p["company"], p["role"]) for p in default] == [(p["name"], p["company"], p["role"]) for p in prospects]


def test_custom_columns_cross_layouts_under_each_tools_name():
    [smartlead] = [p for p in imported((DATA / "smartlead_leads.csv").read_bytes()) if p["first_name"] == "Grace"]
    rows = as_rows([smartlead])
    lemlist = next(csv.DictReader(io.StringIO(write_csv(rows, Layout.LEMLIST))))
    assert lemlist["phone"] == "'+44 20 0000 0000" and lemlist["linkedinUrl"].startswith("https://www.linkedin.com/")
    assert lemlist["firstName"] == "Grace" and lemlist["companyName"] == "Harbourline Logistics"
    instantly = next(csv.DictReader(io.StringIO(write_csv(rows, Layout.INSTANTLY))))
    assert instantly["job_title"] == "Data Platform Lead" and instantly["website"] == "harbourline.example"
    default = next(csv.DictReader(io.StringIO(write_csv(rows))))
    assert default["phone_number"] == "'+44 20 0000 0000" and default["name"] == "Grace Mensah"  # names as imported


def test_no_exported_cell_starts_a_formula():
    prospects = imported((DATA / "formula_cells.csv").read_bytes())
    rows = as_rows(prospects) + [ExportRow(values={"subject": "\tTabbed", "body": "\rCR first", "name": "-1"},
                                           custom={"=cmd": "@x"})]
    for layout in Layout:
        cells = [cell for row in csv.reader(io.StringIO(write_csv(rows, layout))) for cell in row]
        assert not [c for c in cells if c.startswith(("=", "+", "-", "@", "\t", "\r"))], layout
        assert "'=1+2" in cells and "'@SUM(A1)" in cells and "'+cmd|' /C calc'!A0" in cells and "'\tTabbed" in cells
        assert "'=cmd" in cells and "'@x" in cells  # a custom column's name too


def test_escaping_is_a_leading_apostrophe_only_where_a_formula_would_start():
    assert [escape_formula(c) for c in ("=1", "+1", "-1", "@A", "\tx", "\rx", "a=1", "", "'=1", "1-2")] == [
        "'=1", "'+1", "'-1", "'@A", "'\tx", "'\rx", "a=1", "", "'=1", "1-2"]


def test_columns_asked_for_come_in_that_order_and_unknown_ones_are_named():
    rows = as_rows(imported((DATA / "instantly_leads.csv").read_bytes()))
    written = write_csv(rows, Layout.INSTANTLY, ["email", "first_name", "subject", "body", "personalization"])
    assert written.splitlines()[0] == "email,first_name,subject,body,personalization"
    with pytest.raises(RequestValidationError) as caught:
        write_csv(rows, Layout.INSTANTLY, ["email", "firstName"])
    [error] = caught.value.errors()
    assert error["loc"] == ("query", "columns") and "'firstName'" in error["msg"] and "first_name" in error["msg"]


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "cp1252", "utf-16"])
@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_encodings_and_separators_are_read_without_being_told(encoding, delimiter):
    rows = [["First Name", "Last Name", "Company", "Role", "Industry", "Pains"],
            ["Renée", "Müller", "Brasserie Lüttich", "CFO", "food", "cash flow; supplier prices"]]
    text = io.StringIO()
    csv.writer(text, delimiter=delimiter).writerows(rows)
    [prospect] = imported(text.getvalue().encode(encoding))
    assert (prospect["first_name"], prospect["company"], prospect["pains"]) == (
        "Renée", "Brasserie Lüttich", ["cash flow", "supplier prices"])


def test_header_names_are_matched_whatever_their_case_spacing_or_camel_case():
    assert {header_key(h) for h in ("First Name", "first_name", "firstName", "FIRST-NAME", " first  name ")} == {
        "first_name"}
    assert csv_files.FIELD_OF_KEY[header_key("Job Title")] == "title"
    assert csv_files.FIELD_OF_KEY[header_key("companyName")] == "company_name"


def test_duplicate_headers_are_a_422_naming_them():
    says = errors_of(b"name,company,role,Role,pains\nA,B,C,D,E\n")
    assert "line 1" in says and "'role' 2 times" in says
    says = errors_of(b"Name,company,role,NAME\nA,B,C,D\n")
    assert "'Name' 2 times" in says


def test_two_names_for_one_field_are_read_when_they_agree():
    """The default export writes company and company_name, title and role: it imports back, unless a row's differ."""
    [prospect] = imported(b"name,company,company_name,title,role\nAna Lima,Cobalt,Cobalt,CFO,\n")
    assert (prospect["company"], prospect["role"]) == ("Cobalt", "CFO")
    says = errors_of(b"name,company,company_name,role\nAna Lima,Cobalt,Orbit,CFO\n")
    assert "line 2: columns 'company' and 'company_name' give different values for the company_name" in says


def test_a_file_that_is_not_what_the_service_reads_says_why():
    says = errors_of(b"who|what|where\n1|2|3\n")
    assert "line 1" in says and "names no prospect column" in says and "separated by , or ; or a tab" in says
    assert "spreadsheet (.xlsx)" in errors_of(b"PK\x03\x04\x00\x00binary")
    assert "neither UTF-8 nor Windows-1252" in errors_of(b"name,company,role\n\x81\x8d,x,y\n")
    assert "no prospect rows" in errors_of(b"name,company,role\n\n")
    assert "empty" in errors_of(b"")


def test_a_bad_row_names_its_line_and_its_column_as_the_file_names_it():
    data = ("First Name;Company;Job Title;pains\n"
            "Ana;Cobalt;CFO;month-end invoices\n"
            "Kim;Orbit;;\n"  # line 3: no pains, no role, no industry
            ";Nameless;CTO;a pain\n"  # line 4: no name
            "Lee;Fenwick;CTO;a;b;c\n").encode()  # line 5: a ; unquoted in a ;-separated file
    says = errors_of(data)
    assert "line 3: a prospect without pains needs a role" in says, says
    assert "line 4" in says and "name" in says
    assert "line 5: more fields than the header names (6 against 4)" in says and "';' unquoted" in says
    says = errors_of(b"name,Organisation,Job Title,pains\nAna," + b"c" * 501 + b",CFO,a pain\n")
    assert "line 2, Organisation: String should have at most 500 characters" in says, says  # the file's own name


def test_a_file_over_the_limit_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(csv_files, "MAX_CSV_BYTES", 100)
    assert "over the 0 MiB" in errors_of(b"name,company,role\n" + b"a,b,c\n" * 30)


def test_the_documented_limits_fit_in_a_csv_file_and_in_a_request_body():
    """1,000 prospects with every documented field at its longest, in Latin text, under MAX_CSV_BYTES; and their JSON
    under the default MAX_DRAFTS_BYTES (docs/reference/limits.md)."""
    from app.kit.settings import Settings

    longest = {"id": "i" * 200, "first_name": "f" * 500, "last_name": "l" * 500, "email": "e" * 320,
               "company_name": "c" * 500, "title": "t" * 500, "industry": "n" * 500, "pains": ["p" * 500] * 10,
               "goal": "g" * 5000}
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(list(longest))
    for _ in range(1000):
        writer.writerow(["; ".join(v) if isinstance(v, list) else v for v in longest.values()])
    assert len(text.getvalue().encode()) < csv_files.MAX_CSV_BYTES
    import json
    body = json.dumps({"graph_id": "demo", "prospects": [longest] * 1000}).encode()
    assert len(body) + 64 * 1024 < Settings(_env_file=None).max_drafts_bytes  # room for the other fields
    # the file's own limit is reached before the body's: a file just over it gets the message that names it
    assert csv_files.MAX_CSV_BYTES + 64 * 1024 < Settings(_env_file=None).max_drafts_bytes
