"""docker-compose.yml as shipped: valid Compose, and `docker compose up` can start (issue 18).

There is no Docker engine here or on CI, so `docker compose config` cannot run. The file is checked
against the Compose Specification's JSON schema as check-jsonschema ships it (`vendor.compose-spec`),
and for what makes it start: every CoDreamer container gets one SECRET_KEY and API_KEYS from .env,
refused by name when missing; the environments compose would give the containers pass the
service's own production check; the health checks and commands exist; the build context keeps
secrets and local state out and what the Dockerfile copies in. check-jsonschema's command line and
git's ignore rules run in tests/e2e/test_compose.py.
"""

import copy
import importlib.resources
import json
import re
import shlex
import tomllib
from pathlib import Path

import jsonschema
import pytest
import typer
import yaml

from app.kit.settings import Settings
from app.lifecycle import api as lifecycle

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
REQUIRED = ("SECRET_KEY", "API_KEYS")  # ENVIRONMENT=production refuses to start without them (app/lifecycle/api.py)


def compose_schema() -> dict:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath("compose-spec.json").read_bytes())


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())  # safe_load resolves the `<<: *common-env` merges as compose does


def app_services(compose: dict) -> dict[str, dict]:
    """The services that run this repository's image (they build it)."""
    services = {name: service for name, service in compose["services"].items() if "build" in service}
    assert services, "no service builds the CoDreamer image"
    return services


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(entry.split("=", 1) if "=" in entry else (entry, None) for entry in env)
    return {key: None if value is None else str(value) for key, value in env.items()}


# --- the Compose Specification -----------------------------------------------------------------

def schema_errors(document: dict) -> list[str]:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    errors = validator(schema, format_checker=validator.FORMAT_CHECKER).iter_errors(document)
    return sorted(f"{'.'.join(map(str, error.absolute_path)) or '(top)'}: {error.message}" for error in errors)


def test_compose_file_matches_the_compose_specification(compose):
    assert compose_schema()["title"] == "Compose Specification"
    assert schema_errors(compose) == []


def test_the_schema_catches_mistakes(compose):
    broken = copy.deepcopy(compose)
    broken["services"]["api"]["environmnet"] = {"A": "b"}
    broken["services"]["api"]["healthcheck"]["test"] = 5
    errors = schema_errors(broken)
    assert any("environmnet" in error for error in errors) and any("healthcheck" in error for error in errors), errors


# --- one SECRET_KEY and API_KEYS for every container, refused by name when missing --------------

REQUIRED_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*):\?(?P<message>[^}]+)\}")


@pytest.mark.parametrize("variable", REQUIRED)
def test_every_app_container_gets_the_same_required_variable(compose, variable):
    values = {name: environment(service).get(variable) for name, service in app_services(compose).items()}
    for name, value in values.items():
        match = REQUIRED_VARIABLE.fullmatch(value or "")
        assert match, f"{name}: {variable} must be `${{{variable}:?<message>}}` (from .env, no default), not {value!r}"
        assert match["name"] == variable, f"{name}: {variable} comes from ${match['name']}"
        assert variable in match["message"], f"{name}: the refusal must name {variable}: {match['message']!r}"
    assert len(set(values.values())) == 1, f"{variable} differs between containers: {values}"


class Refused(Exception):
    """What `docker compose up` refuses with before it starts anything."""


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's variable substitution, for the forms this file may use; any other `$` form fails the test."""
    def substitute(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        name, operator, argument = match["name"], match["operator"], match["argument"]
        value = variables.get(name)
        if operator is None:
            return value or ""
        if operator in (":?", "?"):
            if value is None or (operator == ":?" and value == ""):
                raise Refused(f"required variable {name} is missing a value: {argument}")
            return value
        if operator == ":-":
            return value if value else argument
        return argument if value is None else value  # "-"

    pattern = r"(?P<escaped>\$\$)|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<operator>:\?|\?|:-|-)(?P<argument>[^}]*))?\}"
    result = re.sub(pattern, substitute, value)
    leftover = re.sub(pattern, "", value)
    assert "$" not in leftover, f"a `$` form this test does not know: {value!r}"
    return result


def env_file(path: Path) -> dict[str, str]:
    variables = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            variables[name.strip()] = value.strip()
    return variables


def container_settings(service: dict, variables: dict[str, str]) -> Settings:
    env = {key: interpolate(value, variables) for key, value in environment(service).items() if value is not None}
    return Settings(_env_file=None, **{key.lower(): value for key, value in env.items()})


def test_env_example_as_copied_is_refused_naming_each_missing_variable(compose):
    variables = env_file(ENV_EXAMPLE)
    for variable in REQUIRED:
        assert variables.get(variable) == "", f".env.example must list {variable}= empty (so an unfilled copy is refused)"
    for name, service in app_services(compose).items():
        with pytest.raises(Refused, match="SECRET_KEY"):
            container_settings(service, variables)
        with pytest.raises(Refused, match="API_KEYS"):
            container_settings(service, variables | {"SECRET_KEY": "x" * 43})


def test_filled_env_starts_every_container_with_one_key(compose):
    variables = env_file(ENV_EXAMPLE) | {"SECRET_KEY": "s" * 43, "API_KEYS": "me:" + "k" * 43}
    settings = {name: container_settings(service, variables) for name, service in app_services(compose).items()}
    for name, each in settings.items():
        assert each.environment == "production", name
        lifecycle.check(each)  # the service's own start-up refusals (API_KEYS, SECRET_KEY, backend) do not fire
    assert {each.secret_key for each in settings.values()} == {"s" * 43}
    assert {tuple(each.api_keys) for each in settings.values()} == {("me:" + "k" * 43,)}
    assert len({each.database_url for each in settings.values()}) == 1


def test_env_example_lists_every_variable_compose_reads():
    used = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", COMPOSE.read_text()))
    listed = set(re.findall(r"^#?\s*([A-Z_][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.MULTILINE))
    assert set(REQUIRED) <= used
    assert used <= listed, f"not in .env.example: {sorted(used - listed)}"
    assert "secrets.token_urlsafe" in ENV_EXAMPLE.read_text()  # how to generate a key


@pytest.mark.parametrize("variable", REQUIRED)
def test_production_refuses_to_start_naming_the_variable(variable):
    present = {"secret_key": "s" * 43, "api_keys": ["me:key"]}
    for missing in (None, ""):
        given = present | {variable.lower(): missing if variable == "SECRET_KEY" else (missing or [])}
        with pytest.raises(lifecycle.StartupError, match=f"requires {variable}"):
            lifecycle.check(Settings(_env_file=None, environment="production", **given))


# --- commands and health checks -----------------------------------------------------------------

def codreamer_commands() -> set[tuple[str, ...]]:
    from app import cli

    paths = set()

    def walk(command, prefix: tuple[str, ...]):
        for name, sub in getattr(command, "commands", {}).items():
            paths.add(prefix + (name,))
            walk(sub, prefix + (name,))

    walk(typer.main.get_command(cli.app), ())
    return paths


def codreamer_invocations(argv: list[str]) -> list[tuple[str, ...]]:
    """Each `codreamer <command> [<subcommand>]` in an argv or a shell line, options left out."""
    words = [word for arg in argv for word in shlex.split(arg.replace(";", " ; ").replace("&&", " && "))]
    found = []
    for i, word in enumerate(words):
        if word == "codreamer":
            found.append(tuple(w for w in words[i + 1:i + 3] if re.fullmatch(r"[a-z]+", w)))
    return found


def assert_codreamer_commands_exist(argv: list[str], where: str):
    known = codreamer_commands()
    for invocation in codreamer_invocations(argv):
        assert invocation[:1] in known, f"{where}: `codreamer {' '.join(invocation)}` is not a command"
        if invocation[:1] == ("db",):
            assert invocation[:2] in known, f"{where}: `codreamer {' '.join(invocation)}` is not a command"


def app_paths() -> set[str]:
    from app.main import create_app

    return set(create_app(Settings(_env_file=None)).openapi()["paths"])


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def image_serves_on() -> int:
    cmd = re.search(r"^CMD (.+)$", dockerfile(), re.MULTILINE)[1]
    return int(re.search(r"codreamer serve .*--port (\d+)", cmd)[1])


def assert_app_healthcheck(argv: list[str], where: str, paths: set[str]):
    assert argv[0] in ("python", "codreamer"), f"{where}: {argv[0]!r} is not in the image (python or codreamer)"
    if argv[0] == "codreamer":
        assert_codreamer_commands_exist(argv, where)
        return
    assert argv[1] == "-c", where
    code = argv[2]
    compile(code, where, "exec")
    urls = re.findall(r"http://127\.0\.0\.1:(\d+)(/[^'\"]*)", code)
    assert urls, f"{where}: no loopback URL in {code!r}"
    for port, path in urls:
        assert int(port) == image_serves_on(), f"{where}: port {port}, the API serves on {image_serves_on()}"
        assert path in paths, f"{where}: {path} is not a route of the app"


def test_healthchecks_and_commands_exist(compose):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "codreamer" in scripts
    paths = app_paths()
    for name, service in compose["services"].items():
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name}: no health check (depends_on waits on them)"
        kind, *argv = check["test"]
        if "build" in service:
            assert kind == "CMD", name
            assert_app_healthcheck(argv, f"{name} healthcheck", paths)
            command = service.get("command")
            if command:
                assert_codreamer_commands_exist(command if isinstance(command, list) else [command], f"{name} command")
        else:
            assert service["image"].startswith("postgres:") and kind == "CMD-SHELL" and argv[0].startswith("pg_isready "), name
    for condition in (dep.get("condition") for s in compose["services"].values() for dep in (s.get("depends_on") or {}).values()):
        assert condition in (None, "service_started", "service_healthy", "service_completed_successfully")


def test_dockerfile_healthcheck_and_command_exist():
    text = dockerfile()
    healthcheck = re.search(r"^HEALTHCHECK .*? CMD (.+)$", text, re.MULTILINE)[1]
    assert_app_healthcheck(shlex.split(healthcheck), "Dockerfile HEALTHCHECK", app_paths())
    cmd = json.loads(re.search(r"^CMD (.+)$", text, re.MULTILINE)[1])
    assert_codreamer_commands_exist(cmd, "Dockerfile CMD")
    assert ("serve",) in codreamer_invocations(cmd)


def test_containers_that_do_not_serve_http_override_the_image_healthcheck(compose):
    for name, service in app_services(compose).items():
        if service.get("command") and ("serve",) not in codreamer_invocations(
                service["command"] if isinstance(service["command"], list) else [service["command"]]):
            test = service.get("healthcheck", {}).get("test", [])
            assert "/readyz" not in " ".join(test), f"{name} does not serve HTTP; the image's HTTP check would fail"


# --- the build context --------------------------------------------------------------------------

def dockerignore_patterns() -> list[tuple[bool, re.Pattern]]:
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i:end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        patterns.append((negated, re.compile(regex)))
    return patterns


def docker_ignores(path: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parent folders decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for negated, regex in dockerignore_patterns():
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            ignored = not negated
    return ignored


def test_dockerignore_keeps_secrets_and_state_out_and_what_the_image_copies_in():
    copied = [src for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile(), re.MULTILINE)
              for src in line.split()[:-1]]
    assert copied, "no COPY in the Dockerfile"
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        assert not docker_ignores(source), f"COPY {source}: excluded by .dockerignore"
    for path in ("app/main.py", "app/knowledge_graph/demo/graph.json", "app/ui/static/index.html", "alembic/env.py"):
        assert not docker_ignores(path), path
    for path in (".env", ".env.example", ".git", ".venv", "data", "data/secret.key", ".art", "tests", "bench",
                 "app/__pycache__", "app/runs/__pycache__/workflow.cpython-311.pyc", ".pytest_cache", "run_01.jsonl"):
        assert docker_ignores(path), f"{path} would be sent to the build"
