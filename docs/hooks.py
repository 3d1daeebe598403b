"""What the docs site takes from the code at build time (mkdocs.yml names this file under `hooks:`), so it cannot drift.

A page asks for a part with a marker on a line of its own:

- `<!-- generated: settings -->`: every setting of `app.kit.settings.Settings` (its environment variable, default,
  type and limits, and the field's description);
- `<!-- generated: judge-spec -->`: the fields of one entry of the `JUDGES` setting;
- `<!-- generated: cli -->`: the `codreamer` command line, from the Typer app in `app/cli.py`;
- `<!-- generated: endpoints -->` and `<!-- generated: webhook-events -->`: the HTTP API's operations and the
  webhook events, from the service's own OpenAPI document;
- `<!-- include: bench/RESULTS.md#NAME -->`: one benchmark's section of bench/RESULTS.md (the one home of measured
  figures), its headings raised a level so that its title is the page's; `#overview` is the part before the first
  section. Each benchmark has a page of its own under docs/benchmarks/results/, and the plots, bench/*.png, are added
  beside those pages.

An unknown marker fails the build. Nothing here opens a connection.
"""

import re
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `mkdocs` run from a clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- (generated|include): (\S+) -->$", re.M)
INCLUDABLE = ("bench/RESULTS.md",)
SECTION = re.compile(r"^<!-- section: (\S+) -->$", re.M)  # bench/report.py opens each benchmark's section with one


def on_files(files, config):
    """The benchmark plots beside the results pages, which link them by their bare names as RESULTS.md does."""
    from mkdocs.structure.files import File

    for plot in sorted((ROOT / "bench").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/results/{plot.name}", abs_src_path=str(plot)))
    return files


def on_page_markdown(markdown, page, config, files):
    return MARKER.sub(lambda match: render(*match.groups()), markdown)


def render(kind: str, name: str) -> str:
    if kind == "include":
        path, _, part = name.partition("#")
        if path not in INCLUDABLE:
            raise ValueError(f"docs/hooks.py: {path} is not among the files a page may include {INCLUDABLE}")
        return section((ROOT / path).read_text(), part) if part else (ROOT / path).read_text()
    generators = {"settings": settings_table, "judge-spec": judge_spec_table, "cli": cli_reference,
                  "endpoints": endpoints_table, "webhook-events": webhook_events_table}
    if name not in generators:
        raise ValueError(f"docs/hooks.py: no generated part named {name!r} (known: {', '.join(generators)})")
    return generators[name]()


def section(text: str, name: str) -> str:
    """One benchmark's section of RESULTS.md with its headings a level up (`overview`: the part before the first)."""
    pieces = SECTION.split(text)
    if name == "overview":
        return pieces[0]
    found = dict(zip(pieces[1::2], pieces[2::2]))
    if name not in found:
        raise ValueError(f"docs/hooks.py: bench/RESULTS.md has no section {name!r} (it has {', '.join(found)})")
    return re.sub(r"^#(#+) ", r"\1 ", found[name], flags=re.M)


# Settings

def cell(text: str | None) -> str:
    """Text for one cell of a Markdown table."""
    return " ".join((text or "").split()).replace("|", "\\|")


def shown(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, tuple, dict)) and not value:
        return "empty"
    if isinstance(value, (list, tuple)):
        return "`" + ",".join(shown(v).strip("`") for v in value) + "`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def kind(annotation) -> str:
    """A field's type as a person writes the variable."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return kind(args[0])
    if origin in (typing.Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        return kind(inner[0]) if len(inner) == 1 else " or ".join(kind(arg) for arg in inner)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{arg}`" for arg in args)
    if origin is list:
        return "comma-separated list"
    if origin is dict:
        return "JSON object"
    return {bool: "`true` or `false`", int: "integer", float: "number", str: "text"}.get(annotation, str(annotation))


def limits(field) -> str:
    """The field's bounds (`≥ 1`, `at least 16 characters`), from its pydantic metadata."""
    said = []
    for item in field.metadata:
        for attribute, text in (("ge", "≥ {}"), ("gt", "> {}"), ("le", "≤ {}"), ("lt", "< {}"),
                                ("min_length", "at least {} characters"), ("max_length", "at most {} characters")):
            value = getattr(item, attribute, None)
            if value is not None and abs(value) < 2**53:  # a 64-bit integer's own range goes without saying
                said.append(text.format(value))
    return ", ".join(said)


def fields_table(model, *, name_of) -> str:
    rows = ["| name | default | type | what it does |", "|---|---|---|---|"]
    defaults: dict = {}
    for name, field in model.model_fields.items():
        if field.is_required():
            default = "required"
        else:
            value = field.get_default(call_default_factory=True, validated_data=defaults)
            defaults[name] = value
            default = shown(value)
        what = cell(kind(field.annotation)) + (f" ({limits(field)})" if limits(field) else "")
        rows.append(f"| `{name_of(name)}` | {default} | {what} | {cell(field.description)} |")
    return "\n".join(rows) + "\n"


def settings_table() -> str:
    from app.kit.settings import Settings

    return fields_table(Settings, name_of=str.upper)


def judge_spec_table() -> str:
    from app.kit.settings import JudgeSpec

    return fields_table(JudgeSpec, name_of=str)


# The command line

def cli_reference() -> str:
    import typer

    from app.cli import app
    from app.runs.schemas import LearnLoopRequest

    def option_help(param) -> str:
        if getattr(param, "help", None):
            return cell(param.help)
        field = LearnLoopRequest.model_fields.get(param.name)
        if field is None:
            return ""
        bounds = limits(field).replace(" characters", "")
        said = f"The run's `{param.name}`, as in `POST /learn-loop`" + (f" ({bounds})" if bounds else "") + "."
        return cell(f"{said} {field.description or ''}")

    def section(command, context, depth: int) -> list[str]:
        lines = [f"{'#' * (depth + 1)} `{context.command_path}`", ""]
        if command.help:
            lines += [command.help.strip(), ""]
        lines += ["```text", command.get_usage(context), "```", ""]
        params = [p for p in command.get_params(context) if not getattr(p, "hidden", False) and p.name != "help"]
        if params:
            lines += ["| option | default | what it does |", "|---|---|---|"]
            for param in params:
                names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
                if param.param_type_name != "option":
                    names = f"`{param.human_readable_name}`"
                if getattr(param, "is_flag", False):
                    default = shown(bool(param.default))
                else:
                    field = LearnLoopRequest.model_fields.get(param.name)
                    if param.default in (None, ()) and field is not None and field.default is not None:
                        param_default = field.default  # left out, the option takes the request field's default
                    else:
                        param_default = param.default
                    default = "—" if param_default in (None, ()) else shown(param_default)
                lines.append(f"| {names} | {default} | {option_help(param)} |")
            lines.append("")
        if hasattr(command, "list_commands"):  # a group (Typer ships its own copy of click: no isinstance)
            for name in command.list_commands(context):
                sub = command.get_command(context, name)
                if sub is not None and not sub.hidden:
                    lines += section(sub, sub.context_class(sub, info_name=name, parent=context), depth + 1)
        return lines

    root = typer.main.get_command(app)
    return "\n".join(section(root, root.context_class(root, info_name="codreamer"), 1)) + "\n"


# The HTTP API

def openapi() -> dict:
    from app.main import create_app
    from app.kit.settings import Settings

    return create_app(Settings(_env_file=None)).openapi()  # built, never started: no database, no socket


def endpoints_table() -> str:
    """Every operation by tag, in the document's order: method, path, summary, and whether it needs the key."""
    spec = openapi()
    lines = []
    for tag in spec["tags"]:
        rows = [(method.upper(), path, operation) for path, item in spec["paths"].items()
                for method, operation in item.items() if tag["name"] in operation.get("tags", [])]
        if not rows:
            continue
        lines += [f"### {tag['name'].capitalize()}", "", "| | path | what | key |", "|---|---|---|---|"]
        for method, path, operation in rows:
            keyed = "yes" if operation.get("security") else "no"
            lines.append(f"| `{method}` | `{path}` | {cell(operation.get('summary'))} | {keyed} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def webhook_events_table() -> str:
    spec = openapi()
    rows = ["| event | its body's `data` |", "|---|---|"]
    for name, item in spec.get("webhooks", {}).items():
        for operation in item.values():
            body = resolve(spec, operation["requestBody"]["content"]["application/json"]["schema"])
            data = resolve(spec, body.get("properties", {}).get("data", {}))
            fields = ", ".join(f"`{field}`" for field in data.get("properties", {}))
            described = data.get("description") or body.get("description") or ""
            rows.append(f"| `{name}` | {(cell(described) + ' ' + fields).strip()} |")
    return "\n".join(rows) + "\n"


def resolve(spec: dict, schema: dict) -> dict:
    """A schema with its `$ref` (and a single `allOf`) followed into the document's components."""
    while True:
        if "$ref" in schema:
            schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        elif len(schema.get("allOf", [])) == 1:
            schema = schema["allOf"][0]
        else:
            return schema
