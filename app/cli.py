"""`codreamer` command line."""

import asyncio
import os
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(no_args_is_help=True, add_completion=False, help="CoDreamer: RL learning loops for sales emails.")
console = Console()


@app.callback()
def _commands() -> None:
    """CoDreamer: RL learning loops for sales emails."""
    from app.kit import logs

    logs.install()  # a cancelled run is one log line, not DBOS's traceback


def _load_graph(path: Path | None):
    from app.knowledge_graph.schemas import GraphDocument

    if path is None:
        return None
    try:
        return GraphDocument.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--graph") from None


# The options of `codreamer run` that are not the RunConfig field of the same name.
_OPTION_OF_FIELD = {"graph_id": "--graph", "scenario_ids": "--scenario", "target_scenario_id": "--target"}


def _option(error: dict) -> str:
    field = str(error["loc"][0]) if error["loc"] else "options"
    return _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))


def _usage_error(exc: ValidationError) -> typer.BadParameter:
    """The request's invalid fields, each by the option that set it (a usage error: exit code 2)."""
    errors = exc.errors()
    if len(errors) == 1:
        return typer.BadParameter(errors[0]["msg"], param_hint=f"'{_option(errors[0])}'")
    return typer.BadParameter("; ".join(f"{_option(error)}: {error['msg']}" for error in errors))


@app.command()
def run(
    iterations: int | None = None,
    rollouts_per_group: int | None = None,
    max_turns: int | None = None,
    learning_rate: float | None = None,
    feedback_weight: float | None = None,
    top_fraction: float | None = None,
    max_tokens_per_turn: int | None = None,
    seed: int | None = None,
    graph: Annotated[Path | None, typer.Option(help="A graph document (JSON); default: the bundled demo.")] = None,
    scenario: Annotated[list[str] | None, typer.Option(help="Training scenario id (repeatable).")] = None,
    target: Annotated[str | None, typer.Option(help="Scenario whose email is published.")] = None,
    keep: Annotated[Path | None, typer.Option(help="Keep the run's database and ART files in this folder.")] = None,
) -> None:
    """Run one learning loop in the foreground, then print a summary table and the final email.

    It is the service's own workflow, executed in this process on a throwaway SQLite database. Each
    knob (--iterations to --seed) is the field of the same name of POST /learn-loop, with its default
    and bounds; a value out of bounds is a usage error naming the option.
    """
    os.environ.setdefault("TQDM_DISABLE", "1")  # ART's own progress bars; we draw ours
    import tempfile

    from app.runs.schemas import LearnLoopRequest

    document = _load_graph(graph)
    given = {"graph_id": document.id if document else None, "scenario_ids": scenario, "target_scenario_id": target,
             "iterations": iterations, "rollouts_per_group": rollouts_per_group, "max_turns": max_turns,
             "learning_rate": learning_rate, "feedback_weight": feedback_weight, "top_fraction": top_fraction,
             "max_tokens_per_turn": max_tokens_per_turn, "seed": seed}
    try:  # what is left out takes RunConfig's default, as in a POST /learn-loop body
        request = LearnLoopRequest(**{field: value for field, value in given.items() if value is not None})
    except ValidationError as exc:
        raise _usage_error(exc) from None
    # Only now the settings' checks and what runs the loop: a usage error above answers in a second, not after the
    # 7 CPU-seconds of importing ART
    settings = _settings_or_exit()
    from fastapi.exceptions import RequestValidationError

    from app.lifecycle.api import StartupError
    from app.lifecycle.local import add_graph, local_service, run_to_end
    from app.lifecycle.local import iterations as run_iterations

    async def main(data_dir: Path):
        async with local_service(data_dir, settings) as process:
            if document is not None:
                await add_graph(process, document)
            with Progress(
                TextColumn("[bold]learning"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(), console=console, transient=False,
            ) as progress:
                task = progress.add_task("loop", total=request.iterations + 1, status="starting")

                def advance(event):
                    if event.type == "iteration.completed":
                        rewards = event.data["rewards"]
                        status = f"reward {rewards['mean']:.3f}" if rewards else "baseline written"
                        progress.update(task, advance=1, status=status)

                finished = await run_to_end(process, request, advance)
            return finished, await run_iterations(process, finished["run_id"])

    try:
        if keep is not None:
            finished, records = asyncio.run(main(keep))
        else:
            with tempfile.TemporaryDirectory(prefix="codreamer-run-") as data_dir:
                finished, records = asyncio.run(main(Path(data_dir)))
    except RequestValidationError as exc:
        raise typer.BadParameter("; ".join(e["msg"] for e in exc.errors())) from None
    except StartupError as exc:  # the run's own database could not be opened
        _exit_with(f"codreamer cannot start: {exc}")
    _summary(finished, records)
    if finished["status"] != "succeeded":
        raise typer.Exit(1)


def _summary(run: dict, records: list[dict]) -> None:
    table = Table(title="Learning loop")
    for column in ("iteration", "reward mean", "reward max", "training step", "top nodes", "seconds"):
        table.add_column(column, justify="right" if column != "top nodes" else "left")
    scores: dict[str, float] = {}
    for r in records:
        scores |= r["node_scores_changed"]
        top = sorted(scores.items(), key=lambda kv: -kv[1])[:3]
        training = r["training"]
        table.add_row(
            str(r["iteration"]),
            f"{r['rewards']['mean']:.3f}" if r["rewards"] else "—",
            f"{r['rewards']['max']:.3f}" if r["rewards"] else "—",
            "—" if training is None else f"{training['step']}{' (skipped)' if training['skipped'] else ''}",
            "\n".join(f"{n} {s:.2f}" for n, s in top if s > 1.0) or "—",
            f"{(r['finished_at'] - r['started_at']).total_seconds():.1f}",
        )
    console.print(table)
    if run["status"] != "succeeded":
        error = run["error"] or {}
        console.print(f"[red]The run {run['status']}: {escape(str(error.get('message', '')))} (step {error.get('step')})")
        return
    email = run["final_email"]
    console.print(Panel(escape(email["body"]), title=f"[bold]{escape(email['subject'])}",
                        subtitle=escape(f"iteration {email.get('iteration')}, judge score "
                                        f"{'—' if email.get('score') is None else format(email['score'], '.3f')}; "
                                        f"citations: {', '.join(email['citations'])}")))


def _exit_with(message: str) -> None:
    """One red line, exit code 1."""
    head, sep, rest = message.partition(": ")
    console.print(f"[red]{escape(head)}{sep}[/red]{escape(rest)}", soft_wrap=True, highlight=False)
    raise typer.Exit(1)


def _config_problem(exc: ValidationError) -> str:
    """The invalid settings by name, without their values (a DATABASE_URL may hold a password). A default made from
    an invalid setting is left unsaid: the setting it reads is named already."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']).upper() or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
        for e in exc.errors() if e["type"] != "default_factory_not_called"
    )


def _database_problem(settings) -> str | None:
    """Connects to DATABASE_URL once: None, or one line saying why the database cannot be used."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from app.kit.db import driver_url
    from app.kit.logs import database_errors, database_problem

    try:
        if settings.is_sqlite:
            settings.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            engine, probe = create_engine(driver_url(settings.database_url, sync=True), poolclass=NullPool), "PRAGMA schema_version"
        else:
            engine = create_engine(driver_url(settings.database_url, sync=True), poolclass=NullPool,
                                   connect_args={"connect_timeout": 5})
            probe = "SELECT 1"
        try:
            with engine.connect() as connection:
                connection.execute(text(probe))
        finally:
            engine.dispose()
    except database_errors() as exc:
        return database_problem(settings.database_url, exc)
    return None


def _settings_or_exit(*, service: bool = True, database: bool = False):
    """The settings, or one line saying what is wrong and exit code 1.

    `service`: the checks of `lifecycle.check` (API keys in production, the model backend);
    `database`: DATABASE_URL answers.
    """
    from app.kit.settings import get_settings

    try:
        settings = get_settings()
    except ValidationError as exc:
        _exit_with(f"codreamer cannot start: {_config_problem(exc)}")
    from app.kit import logs

    logs.limit_repeats(settings.log_repeats, settings.log_repeat_period_s)
    if database and (problem := _database_problem(settings)):
        _exit_with(f"codreamer cannot start: {problem}")
    if service:
        from app.lifecycle import api as lifecycle

        try:
            lifecycle.check(settings)
        except lifecycle.StartupError as exc:
            _exit_with(f"codreamer cannot start: {exc}")
    return settings


def _listen_or_exit(host: str, port: int):
    """The server's listening socket, bound before anything starts, so a taken port is one line and exit 1."""
    import errno
    import socket

    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        _exit_with(f"codreamer cannot start: cannot resolve host {host!r}: {exc.strerror}")
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart may reuse a port in TIME_WAIT
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            _exit_with(f"codreamer cannot start: port {port} on {host} is already in use")
        _exit_with(f"codreamer cannot start: cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(True)
    return sock


def _one_line_startup_failure(app):
    """The ASGI app, except that a StartupError in its lifespan is one line in uvicorn's log, not a traceback."""

    async def guarded(scope, receive, send):
        if scope["type"] != "lifespan":
            return await app(scope, receive, send)

        async def send_message(message):
            if message["type"] == "lifespan.startup.failed":
                last = (message.get("message") or "").strip().splitlines()[-1:]
                if last and last[0].startswith("app.lifecycle.StartupError: "):
                    message = message | {"message": "codreamer cannot start: " + last[0].partition(": ")[2]}
            await send(message)

        await app(scope, receive, send_message)

    return guarded


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="The address to listen on (0.0.0.0: beyond this machine).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="The port to listen on.")] = 8000,
) -> None:
    """The API, plus a run worker in a child process unless RUN_WORKER=false (the embedded default: SQLite).

    SIGTERM or Ctrl-C stops it cleanly (exit 0): open requests and runs in flight get SHUTDOWN_DRAIN_S
    to finish, then runs still going are left to recovery under this EXECUTOR_ID.
    """
    os.environ.setdefault("TQDM_DISABLE", "1")
    listener = _listen_or_exit(host, port)  # first: a taken port fails at once, before any start-up work
    settings = _settings_or_exit(database=True)
    import logging
    import math

    import uvicorn

    from app.kit.serving import http_protocol
    from app.main import create_app

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises a caught SIGTERM/SIGINT once it has shut down, which ends the process
            # with 143 or a KeyboardInterrupt traceback; the shutdown was graceful, so exit 0 instead.
            getattr(self, "_captured_signals", []).clear()

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if self.started:  # uvicorn announces only the sockets it binds itself
                logging.getLogger("uvicorn.error").info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", host, port)

    config = uvicorn.Config(
        _one_line_startup_failure(create_app(settings, worker_process=True)), host=host, port=port, log_level="info", access_log=settings.access_log,
        timeout_graceful_shutdown=max(1, math.ceil(settings.shutdown_drain_s)),
        http=http_protocol(settings),
    )
    try:
        Server(config).run(sockets=[listener])
    except SystemExit as exc:  # uvicorn's start-up failure: the lifespan failed and uvicorn logged why
        raise typer.Exit(1 if exc.code else 0) from None


@app.command()
def worker(child: Annotated[bool, typer.Option(hidden=True, help="started by `serve`: quiet, and dies with it")] = False) -> None:
    """A run worker only: executes queued runs and delivers webhooks (scale-out on PostgreSQL)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    import signal

    settings = _settings_or_exit(database=True)
    from app.lifecycle import api as lifecycle
    from app.lifecycle.worker import start as start_worker
    from app.lifecycle.worker import stop as stop_worker

    if child:
        from app.kit.worker_process import follow_parent

        follow_parent()
    say = (lambda _: None) if child else console.print

    async def main():
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):  # from the start: a signal during start-up stops right after it
            loop.add_signal_handler(signum, stopping.set)
        services = await start_worker(settings, api=False)
        say(f"worker {settings.executor_id} running; Ctrl-C or SIGTERM stops it")
        if child:
            from app.kit.worker_process import forward_readiness

            await forward_readiness(services.api.health, stopping)
        await stopping.wait()
        say(f"worker {settings.executor_id} stopping (up to {settings.shutdown_drain_s:g} s for runs in flight)")
        await stop_worker(services)

    try:
        asyncio.run(main())
    except lifecycle.StartupError as exc:
        _exit_with(f"codreamer cannot start: {exc}")
    say(f"worker {settings.executor_id} stopped")


db = typer.Typer(help="Database commands.")
app.add_typer(db, name="db")


@db.command()
def upgrade() -> None:
    """Apply migrations to DATABASE_URL."""
    from app.kit import migrations
    from app.kit.logs import database_errors, database_problem

    settings = _settings_or_exit(service=False)
    try:
        migrations.upgrade(settings.database_url)
    except database_errors() as exc:
        _exit_with(database_problem(settings.database_url, exc))
    console.print(f"database at revision {migrations.head_revision()}")


@db.command()
def check() -> None:
    """Exit 0 when DATABASE_URL is reachable and migrated (a health check for workers)."""
    from app.kit import migrations
    from app.kit.db import Database
    from app.kit.logs import database_problem

    settings = _settings_or_exit(service=False)

    async def current():
        database = Database(settings)
        try:
            async with database.connection() as connection:
                return await migrations.current_revision(connection)
        finally:
            await database.close()

    try:
        revision = asyncio.run(current())
    except Exception as exc:
        _exit_with(database_problem(settings.database_url, exc))
    if revision != migrations.head_revision():
        console.print(f"[red]database at {revision}, expected {migrations.head_revision()}[/red]")
        raise typer.Exit(1)
    console.print(f"database at revision {revision}")


def main() -> None:
    app()
