"""`codreamer` command line."""

import asyncio
import os
import uuid
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
    from app.knowledge_graph.graph import KnowledgeGraph
    from app.knowledge_graph.schemas import GraphDocument
    from app.knowledge_graph.service import demo_graph

    if path is None:
        return demo_graph()
    try:
        return KnowledgeGraph(GraphDocument.model_validate_json(path.read_bytes()))
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
) -> None:
    """Run one learning loop in the foreground, then print a summary table and the final email."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # ART's own progress bars; we draw ours
    from app.backends.embedded import EmbeddedBackend
    from app.backends.registry import SPECS, BackendUnavailable, create_backend, create_model
    from app.loop.engine import LoopConfigError, run_learning_loop
    from app.loop.runtime import create_feedback, create_judge
    from app.loop.schemas import LoopConfig
    from app.settings import get_settings

    from app.observability import init_tracing

    settings = get_settings()
    init_tracing(settings.wandb_api_key, settings.weave_project)
    knowledge_graph = _load_graph(graph)
    try:
        config = LoopConfig(
            graph_id=knowledge_graph.id, scenario_ids=scenario, target_scenario_id=target, iterations=iterations,
            rollouts_per_group=rollouts_per_group, max_turns=max_turns,
            learning_rate=learning_rate or SPECS[settings.model_backend].default_learning_rate,
            feedback_weight=feedback_weight, top_fraction=top_fraction, seed=seed,
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from None

    try:
        backend = create_backend(settings.model_backend, settings)
    except BackendUnavailable as exc:
        console.print(f"[red]{escape(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None
    spec = SPECS[settings.model_backend]

    async def main():
        judge_server = backend if isinstance(backend, EmbeddedBackend) else EmbeddedBackend()
        try:
            judge = create_judge(settings, judge_server)
            model = create_model(settings.model_backend, settings, uuid.uuid4().hex[:8])
            with Progress(
                TextColumn("[bold]learning"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(), console=console, transient=False,
            ) as progress:
                task = progress.add_task("loop", total=iterations + 1, status="baseline")

                def advance(result):
                    status = f"reward {result.rewards.mean:.3f}" if result.rewards else "baseline written"
                    progress.update(task, advance=1, status=status)

                return await run_learning_loop(
                    config, backend=backend, model=model, graph=knowledge_graph, judge=judge,
                    feedback=create_feedback(knowledge_graph), concurrency=settings.rollout_concurrency,
                    train_options=spec.options().model_dump(), retries=settings.backend_retries, on_iteration=advance,
                )
        finally:
            for server in {id(s): s for s in (backend, judge_server) if s is not None}.values():
                await server.close()

    try:
        results = asyncio.run(main())
    except LoopConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    _summary(results)


def _summary(results) -> None:
    table = Table(title="Learning loop")
    for column in ("iteration", "reward mean", "reward max", "training step", "top nodes", "seconds"):
        table.add_column(column, justify="right" if column != "top nodes" else "left")
    for r in results:
        top = sorted(r.node_scores.items(), key=lambda kv: -kv[1])[:3]
        training = "—" if r.training is None else f"{r.training.step}{' (skipped)' if r.training.skipped else ''}"
        table.add_row(
            str(r.iteration),
            f"{r.rewards.mean:.3f}" if r.rewards else "—",
            f"{r.rewards.max:.3f}" if r.rewards else "—",
            training,
            "\n".join(f"{n} {s:.2f}" for n, s in top if s > 1.0) or "—",
            f"{(r.finished_at - r.started_at).total_seconds():.1f}",
        )
    console.print(table)
    email = results[-1].email
    if email is None:
        console.print("[red]The last iteration produced no email.")
        return
    console.print(Panel(escape(email.body), title=f"[bold]{escape(email.subject)}", subtitle=escape(f"citations: {', '.join(email.citations)}")))


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
