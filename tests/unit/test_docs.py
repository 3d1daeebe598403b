"""The README and the docs say what the code does: the graph format's fields are the upload schema's, the generated
references cover every setting and command, shell blocks follow the convention that decides which ones a test runs,
and the README stays a front page (tests/e2e/test_docs_site.py builds the site; test_docs_blocks.py and
test_readme.py run the blocks)."""

import importlib.util
import json
import re
import types
import typing
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel

from app.cli import app as cli
from app.events.signing import signed_headers
from app.kit.settings import Settings
from app.knowledge_graph.schemas import GraphDocument

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^(\s*)(`{3,})(\S*)")
RUN, SHOWN = "bash", "console"  # a bash block is run by a test; a console block is shown, not run


def hooks() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fences(path: Path) -> list[tuple[str, str]]:
    """Each fenced block of a Markdown file: (its language, its text)."""
    blocks, opened, language, lines = [], None, "", []
    for line in path.read_text().splitlines():
        match = FENCE.match(line)
        if opened is None and match:
            opened, language, lines = match.group(2), match.group(3), []
        elif opened is not None and line.strip() == opened:
            blocks.append((language, "\n".join(lines)))
            opened = None
        elif opened is not None:
            lines.append(line)
    assert opened is None, f"{path}: a fence is never closed"
    return blocks


def test_the_readme_is_a_front_page_without_dates():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024, len(readme.encode())
    assert not re.search(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b", readme)
    assert not re.search(r"\b(January|February|March|April|May|June|July|August|September|October|November|December)"
                         r"\s+(\d{1,2},?\s+)?(19|20)\d\d\b", readme)
    for target in re.findall(r"\]\(((?:docs|bench)/[^)#]+)", readme):
        assert (ROOT / target).is_file(), f"the README links {target}, which does not exist"
    assert "](docs/dashboard.png)" in readme


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda path: str(path.relative_to(ROOT)))
def test_every_shell_block_is_either_run_or_shown(path):
    """Which blocks tests/e2e runs is decided by the fence: `bash` is run, `console` is not. A block with no language,
    or `sh`/`shell`, would be neither; a Mermaid diagram would make Material load Mermaid from a CDN."""
    for language, text in fences(path):
        assert language not in ("", "sh", "shell", "zsh", "shell-session"), (path, text[:200])
        assert language != "mermaid", path


def schema_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field path a document of `model` may hold: `nodes`, `nodes[].id`, `scenarios[].prospect.name`…"""
    paths = []
    for name, field in model.model_fields.items():
        path = prefix + name
        paths.append(path)
        annotation = field.annotation
        if typing.get_origin(annotation) is list:
            (item,) = typing.get_args(annotation)
            if isinstance(item, type) and issubclass(item, BaseModel):
                paths += schema_paths(item, path + "[].")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            paths += schema_paths(annotation, path + ".")
    return paths


def test_the_graph_format_page_documents_every_field_of_the_upload_schema():
    page = (DOCS / "guide" / "knowledge-graphs.md").read_text()
    section = page.split("\n## Fields\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    expected = schema_paths(GraphDocument)
    assert len(expected) == 29  # 7 of the document, 5 per node, 3 per edge, 4 per scenario, 7 per prospect, 3 per offer
    assert documented == expected, (sorted(set(expected) - set(documented)), sorted(set(documented) - set(expected)))


def test_the_graph_format_page_shows_the_example_file_and_it_is_valid():
    example = (DOCS / "example-graph.json").read_text()
    shown = [json.loads(text) for language, text in fences(DOCS / "guide" / "knowledge-graphs.md") if language == "json"]
    assert shown == [json.loads(example)]
    GraphDocument.model_validate_json(example)


def test_the_settings_reference_lists_every_setting_with_its_description():
    table = hooks().settings_table()
    rows = {match.group(1): match.group(0) for match in re.finditer(r"^\| `([A-Z_]+)` \|.*$", table, re.M)}
    assert list(rows) == [name.upper() for name in Settings.model_fields]
    for name, field in Settings.model_fields.items():
        first_words = " ".join(field.description.split()[:4]).replace("|", "\\|")
        assert first_words in rows[name.upper()], name
    assert "| `DATABASE_POOL_SIZE` | `10` |" in table  # a default made from another setting's default
    assert "| `WEBHOOK_RETRY_SCHEDULE` | `5,30,120,600,1800,3600,7200,14400,28800,43200` |" in table
    assert "| `SECRET_KEY` | unset |" in table


def test_the_cli_reference_covers_every_visible_command_and_option():
    page = hooks().cli_reference()
    group = typer.main.get_command(cli)
    context = group.context_class(group, info_name="codreamer")

    def walk(command, context, path):
        yield path, command, context
        if hasattr(command, "list_commands"):
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=context), f"{path} {name}")

    commands = list(walk(group, context, "codreamer"))
    assert {path for path, _, _ in commands} >= {"codreamer run", "codreamer serve", "codreamer worker",
                                                   "codreamer db upgrade", "codreamer db check"}
    for path, command, context in commands:
        assert (f"`{path}`" in page) != command.hidden, path
        for param in command.get_params(context):
            if param.param_type_name == "option" and param.name != "help":
                assert (f"`{param.opts[0]}`" in page) != param.hidden, (path, param.opts)


def test_an_unknown_marker_fails_the_build():
    module = hooks()
    with pytest.raises(ValueError, match="no generated part named 'nothing'"):
        module.on_page_markdown("<!-- generated: nothing -->", page=None, config=None, files=None)
    with pytest.raises(ValueError, match="not among the files"):
        module.on_page_markdown("<!-- include: pyproject.toml -->", page=None, config=None, files=None)


def test_the_webhook_verification_example_accepts_our_signature_and_refuses_a_forged_one():
    """The Python block of the HTTP API reference, run against headers made by the service's own signing code."""
    [code] = [text for language, text in fences(DOCS / "reference" / "http-api.md") if language == "python"]
    namespace: dict = {}
    exec(compile(code, "http-api.md", "exec"), namespace)
    secret, body = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", '{"type": "run.started", "data": {}}'
    headers = signed_headers(secret, "evt_1", datetime.now(UTC), body)
    assert namespace["handle"](body.encode(), headers, secret) == json.loads(body)
    assert namespace["handle"](body.replace("started", "failed").encode(), headers, secret) is None
