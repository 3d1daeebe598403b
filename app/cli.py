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


def _load_graph(path: Path | None):
    from app.knowledge_graph.schemas import GraphDocument

    if path is None:
        return None
    try:
        return GraphDocument.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--graph") from None


@app.command()
def run(
    iterations: Annotated[int, typer.Option(min=1, max=200)] = 3,
    rollouts_per_group: Annotated[int, typer.Option(min=2, max=64)] = 4,
    max_turns: Annotated[int, typer.Option(min=1, max=32)] = 6,
    learning_rate: Annotated[float | None, typer.Option(min=0.0, help="Default: the backend's.")] = None,
    feedback_weight: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.3,
    top_fraction: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.5,
    seed: int = 0,
    graph: Annotated[Path | None, typer.Option(help="A graph document (JSON); default: the bundled demo.")] = None,
    scenario: Annotated[list[str] | None, typer.Option(help="Training scenario id (repeatable).")] = None,
    target: Annotated[str | None, typer.Option(help="Scenario whose email is published.")] = None,
    keep: Annotated[Path | None, typer.Option(help="Keep the run's database and ART files in this folder.")] = None,
) -> None:
    """Run one learning loop in the foreground, then print a summary table and the final email.

    It is the service's own workflow, executed in this process on a throwaway SQLite database.
    """
    os.environ.setdefault("TQDM_DISABLE", "1")  # ART's own progress bars; we draw ours
    import tempfile

    from fastapi.exceptions import RequestValidationError

    from app.local import add_graph, iterations as run_iterations, local_service, run_to_end
    from app.runs.schemas import LearnLoopRequest

    settings = _settings_or_exit()
    document = _load_graph(graph)
    try:
        request = LearnLoopRequest(
            graph_id=document.id if document else "demo", scenario_ids=scenario, target_scenario_id=target,
            iterations=iterations, rollouts_per_group=rollouts_per_group, max_turns=max_turns, learning_rate=learning_rate,
            feedback_weight=feedback_weight, top_fraction=top_fraction, seed=seed,
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from None

    async def main(data_dir: Path):
        async with local_service(data_dir, settings) as process:
            if document is not None:
                await add_graph(process, document)
            with Progress(
                TextColumn("[bold]learning"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(), console=console, transient=False,
            ) as progress:
                task = progress.add_task("loop", total=iterations + 1, status="starting")

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


def _settings_or_exit():
    from app import lifecycle
    from app.settings import get_settings

    try:
        settings = get_settings()
        lifecycle.check(settings)
    except (ValidationError, lifecycle.StartupError) as exc:
        console.print(f"[red]codreamer cannot start:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    return settings


@app.command()
def serve(host: str = "127.0.0.1", port: Annotated[int, typer.Option(min=1, max=65535)] = 8000) -> None:
    """The API, plus a run worker unless RUN_WORKER=false (the embedded default: one process, SQLite)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    import uvicorn

    from app.main import create_app

    settings = _settings_or_exit()
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", access_log=settings.access_log)


@app.command()
def worker() -> None:
    """A run worker only: executes queued runs and delivers webhooks (scale-out on PostgreSQL)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    import signal

    from app import lifecycle

    settings = _settings_or_exit()

    async def main():
        services = await lifecycle.start(settings, worker=True)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        console.print(f"worker {settings.executor_id} running; Ctrl-C stops it")
        await stopping.wait()
        await lifecycle.stop(services)

    asyncio.run(main())


db = typer.Typer(help="Database commands.")
app.add_typer(db, name="db")


@db.command()
def upgrade() -> None:
    """Apply migrations to DATABASE_URL."""
    from app import migrations
    from app.settings import get_settings

    migrations.upgrade(get_settings().database_url)
    console.print(f"database at revision {migrations.head_revision()}")


@db.command()
def check() -> None:
    """Exit 0 when DATABASE_URL is reachable and migrated (a health check for workers)."""
    from app import migrations
    from app.db import Database
    from app.settings import get_settings

    async def current():
        database = Database(get_settings())
        try:
            return await migrations.current_revision(database.engine)
        finally:
            await database.close()

    try:
        revision = asyncio.run(current())
    except Exception as exc:
        console.print(f"[red]database unreachable:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    if revision != migrations.head_revision():
        console.print(f"[red]database at {revision}, expected {migrations.head_revision()}[/red]")
        raise typer.Exit(1)
    console.print(f"database at revision {revision}")


def main() -> None:
    app()
