"""Reads and writes of runs and what they own (the trajectories' store is `app.runs.trajectories`)."""


from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.schemas import Email, TracedEmail
from app.backends.specs import delete_stored_checkpoints
from app.events import service as events
from app.events.schemas import Subject, SubjectKind
from app.events.ssrf import redacted
from app.kit.db import Database
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores, ScenarioScores
from app.loop.outcome_model import FeedbackSource
from app.outcomes import refs
from app.outcomes import repository as outcomes
from app.outcomes.models import EmailRef
from app.runs.models import Iteration, NodeScore, NodeScoreChange, Run, TrajectoryRecord
from app.runs.status import ACTIVE, RunStatus

# ---------------------------------------------------------------- node scores


async def current_scores(session: AsyncSession, run_id: str) -> ScenarioScores:
    """Per scenario, only the scores that moved from 1.0; every other node of the graph is at 1.0."""
    rows = await session.execute(
        select(NodeScore.scenario_id, NodeScore.node_id, NodeScore.score).where(NodeScore.run_id == run_id)
    )
    return _by_scenario(rows.tuples())


async def scores_after(session: AsyncSession, run_id: str, iteration: int) -> ScenarioScores:
    """The scores as they were right after `iteration`: each (scenario, node)'s last change up to it."""
    rows = await session.execute(
        select(NodeScoreChange.scenario_id, NodeScoreChange.node_id, NodeScoreChange.score)
        .where(NodeScoreChange.run_id == run_id, NodeScoreChange.iteration <= iteration)
        .order_by(NodeScoreChange.iteration)
    )
    return _by_scenario(rows.tuples())


def _by_scenario(rows) -> ScenarioScores:
    scores = ScenarioScores()
    for scenario_id, node_id, score in rows:
        scores.setdefault(scenario_id, NodeScores())[node_id] = score
    return scores


def full_scores(graph: KnowledgeGraph, moved: dict[str, float]) -> dict[str, float]:
    """Every node of the graph as it is now: a node a replacement removed is left out."""
    return graph.initial_scores | {node: score for node, score in moved.items() if node in graph.nodes}


# ---------------------------------------------------------------- trajectories


def feedback_source(metrics: dict[str, float]) -> FeedbackSource:
    if "feedback_score" not in metrics:
        return FeedbackSource.NONE
    return FeedbackSource.OBSERVED if metrics.get("feedback_observed") else FeedbackSource.PREDICTED


def email_ref(run: Run, graph: KnowledgeGraph, iteration: int, slot: int, scenario_id: str, email: Email,
              judge_score: float | None) -> EmailRef:
    """Where the email came from, and the traits the outcome model learns its outcomes over."""
    prospect = graph.scenarios[scenario_id].prospect
    return outcomes.email_ref(refs.email_ref(run.id, iteration, slot), email, name=prospect.name, company=prospect.company,
                              role=prospect.role, industry=prospect.industry, tenant=run.tenant, run_id=run.id,
                              graph_id=run.graph_id, iteration=iteration, slot=slot, scenario_id=scenario_id,
                              judge_score=judge_score)


async def trajectory_emails(session: AsyncSession, run_id: str, iteration: int, scenario_id: str) -> list[tuple[int, TracedEmail]]:
    """(position, email) of the iteration's candidates for one scenario that finalized an email."""
    rows = await session.execute(select(TrajectoryRecord.position, TrajectoryRecord.email).where(
        TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration, TrajectoryRecord.scenario_id == scenario_id,
    ).order_by(TrajectoryRecord.position))
    return [(position, TracedEmail.model_validate(email)) for position, email in rows if email]


async def drop_conversations(session: AsyncSession, run_id: str, *, through: int) -> None:
    """Retention: the messages of iterations up to `through` are dropped; rewards, scores and emails stay."""
    await session.execute(
        update(TrajectoryRecord)
        .where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration <= through)
        .values(trajectory={})
    )


async def drop_unrecorded_trajectories(session: AsyncSession, run_id: str) -> None:
    """Trajectories of an iteration that was never recorded, once the run ended (cancelled or failed mid-way).

    A run still running was interrupted (a shutdown): recovery resumes it and needs them. A deleted
    run took its trajectories with it.
    """
    run = await session.get(Run, run_id)
    if run is None or not run.status.terminal:
        return
    latest = await latest_iteration(session, run_id)
    await session.execute(delete(TrajectoryRecord).where(
        TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration > (-1 if latest is None else latest)))


# ---------------------------------------------------------------- runs and iterations


async def owned_run(session: AsyncSession, run_id: str, tenant: str) -> Run | None:
    """The run, if it belongs to the tenant: to anyone else it does not exist."""
    return await session.scalar(select(Run).where(Run.id == run_id, Run.tenant == tenant))


def _best_first():
    """Published emails by their judge score, best first; among equal scores the latest (emails from
    before scores were recorded count as unscored, so the latest of them wins)."""
    return func.coalesce(Iteration.email["score"].as_float(), -1.0).desc(), Iteration.iteration.desc()


def version(run_id: str, _tenant: str, attempt: int, last_seq: int, status: str, waiting: str | None) -> tuple:
    """What changes whenever the run's view, iteration list or an iteration's detail can: each change of state
    announces itself as an event (last_seq), except a resume (attempt) and the end of a wait (waiting). From the
    row as stored: `waiting` is JSON text, `null` when the run does not wait."""
    return run_id, attempt, last_seq, status, waiting not in (None, "null")


# A run's row as migration 0009's trigger announces it on RUN_VERSIONS when one of these columns changes: a column
# added here needs a migration that adds it to the trigger, or kept versions would miss its changes.
_VERSION_ROW = "id, tenant, attempt, last_seq, status, waiting"
RUN_VERSIONS = "run_versions"


async def run_version(db: Database, run_id: str, tenant: str) -> tuple | None:
    """The run's version, if the tenant owns it: kept and updated by the run's notices (PostgreSQL), else a glance
    (pollers ask this most)."""
    kept = db.kept(RUN_VERSIONS)
    row = kept.row(run_id)
    if row is None:
        token = kept.token()
        rows = await db.glance(f"SELECT {_VERSION_ROW} FROM runs WHERE id = :run_id", run_id=run_id)
        if not rows:
            return None
        row = rows[0]
        kept.keep_row(token, run_id, row)
    return version(*row) if row[1] == tenant else None


async def runs_page_versions(db: Database, *, tenant: str, limit: int, after: str | None, status: str | None) -> list[tuple]:
    """The version of each run on a page of the tenant's runs, newest first, and of the first run after it if any."""
    kept = db.kept(RUN_VERSIONS)
    key = (tenant, limit, after, status and str(status))
    rows = kept.query(key)
    if rows is None:
        token = kept.token()
        filters = {"tenant": tenant} | ({"status": str(status)} if status else {}) | ({"after": after} if after else {})
        where = " AND ".join("id < :after" if name == "after" else f"{name} = :{name}" for name in filters)
        rows = await db.glance(f"SELECT {_VERSION_ROW} FROM runs WHERE {where} ORDER BY id DESC LIMIT :n",
                               **filters, n=limit + 1)
        kept.keep_query(token, key, rows)
    return [version(*row) for row in rows]


async def published(session: AsyncSession, run_id: str) -> dict:
    """The run's last published email (`final_email`) and its best-scoring one (`best_email`), each with its iteration."""
    emails = {}
    for name, order in (("final_email", (Iteration.iteration.desc(),)), ("best_email", _best_first())):
        row = (await session.execute(
            select(Iteration.email, Iteration.iteration).where(Iteration.run_id == run_id).order_by(*order).limit(1)
        )).first()
        emails[name] = _final(*row) if row else None
    return emails


def _final(email: dict | None, iteration: int | None) -> dict | None:
    return None if email is None or iteration is None else email | {"iteration": iteration}


def _latest_of_run(column):
    return (
        select(column).where(Iteration.run_id == Run.id)
        .order_by(Iteration.iteration.desc()).limit(1).correlate(Run).scalar_subquery()
    )


def _best_of_run(column):
    return (
        select(column).where(Iteration.run_id == Run.id).order_by(*_best_first()).limit(1).correlate(Run).scalar_subquery()
    )


_VIEW_COLUMNS = (Run.id, Run.status, Run.iterations_total, Run.config, Run.iterations_completed,
                 Run.created_at, Run.started_at, Run.finished_at, Run.error, Run.waiting)


def _run_query():
    """A run's viewed columns with its latest email and its best-scoring one (each with its iteration): one query,
    rows and no ORM objects (a view is read far more often than anything else)."""
    return select(*_VIEW_COLUMNS, _latest_of_run(Iteration.email).label("latest"),
                  _latest_of_run(Iteration.iteration).label("latest_iteration"),
                  _best_of_run(Iteration.email).label("best"), _best_of_run(Iteration.iteration).label("best_iteration"))


def run_view(row) -> dict:
    """The API's view of a `_run_query` row."""
    return {
        "run_id": row.id, "status": row.status, "iterations_total": row.iterations_total,
        "config": row.config | {"webhook_url": row.config.get("webhook_url") and redacted(row.config["webhook_url"])},
        "iterations_completed": row.iterations_completed, "created_at": row.created_at, "started_at": row.started_at,
        "finished_at": row.finished_at, "error": row.error, "waiting": row.waiting, "latest_email": row.latest,
        "final_email": _final(row.latest, row.latest_iteration) if row.status == RunStatus.SUCCEEDED else None,
        "best_email": _final(row.best, row.best_iteration),
    }


# Built once: building this statement (four subqueries) and its cache key costs about 1 ms a call, running it 0.05.
_RUN_VIEWS = _run_query().where(Run.id.in_(bindparam("run_ids", expanding=True)))
_TENANT_RUN_VIEW = _run_query().where(Run.id == bindparam("run_id"), Run.tenant == bindparam("tenant"))


async def get_run_view(session: AsyncSession, run_id: str, tenant: str | None = None) -> dict | None:
    """The run (if `tenant` owns it) and its latest and best emails in one query, as a write's answer shows it."""
    statement, params = ((_RUN_VIEWS, {"run_ids": [run_id]}) if tenant is None
                         else (_TENANT_RUN_VIEW, {"run_id": run_id, "tenant": tenant}))
    row = (await session.execute(statement, params)).first()
    return None if row is None else run_view(row)


async def run_views(db: Database, run_ids: list[str]) -> dict[str, dict]:
    """Views of these runs (those that still exist), by id, in one query."""
    return {row.id: run_view(row) for row in await db.rows(_RUN_VIEWS, {"run_ids": run_ids})}


_ITERATIONS = (select(Iteration.__table__).where(Iteration.run_id == bindparam("run_id"), Iteration.iteration > bindparam("after"))
               .order_by(Iteration.iteration))


async def iterations(db: Database, run_id: str, after: int = -1) -> list[dict]:
    """The run's recorded iterations in order, those after iteration `after` only."""
    return [Iteration.view(row) for row in await db.rows(_ITERATIONS, {"run_id": run_id, "after": after})]


async def iteration_detail(session: AsyncSession, run_id: str, iteration: int) -> dict | None:
    row = await session.get(Iteration, (run_id, iteration))
    if row is None:
        return None
    trajectories = (await session.scalars(
        select(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration)
        .order_by(TrajectoryRecord.position)
    )).all()
    return Iteration.view(row) | {"trajectories": [
        {"scenario_id": t.scenario_id, "reward": t.reward, "judge_score": t.judge_score,
         "feedback_score": t.feedback_score, "feedback_source": t.feedback_source or FeedbackSource.NONE,
         "feedback_confidence": t.feedback_confidence, "email": t.email, "turns": t.turns}
        for t in trajectories
    ]}


async def latest_iteration(session: AsyncSession, run_id: str) -> int | None:
    return await session.scalar(select(Iteration.iteration).where(Iteration.run_id == run_id).order_by(Iteration.iteration.desc()).limit(1))


async def last_trained_step(session: AsyncSession, run_id: str) -> int | None:
    """The policy step the latest recorded training left (None before any): what a pipelined generation samples."""
    training = await session.scalar(select(Iteration.training).where(
        Iteration.run_id == run_id, Iteration.training.is_not(None)).order_by(Iteration.iteration.desc()).limit(1))
    return None if training is None else int(training["step"])


def subject(run: Run) -> Subject:
    """Whom the run's events belong to."""
    return Subject(SubjectKind.RUN, run.id, run.tenant)


async def delete_run(session: AsyncSession, run: Run, model_name: str) -> None:
    """The run and its history: iterations, trajectories, scores and idempotency keys go by ON DELETE CASCADE; its
    events (with their deliveries), the refs of its own emails and their outcomes, and its stored checkpoints,
    explicitly (no foreign key). What its kept policies hold (their snapshot, their checkpoint's copy, the drafts
    written with them) stays."""
    await outcomes.forget_refs(session, (EmailRef.run_id == run.id) & EmailRef.draft_batch_id.is_(None))
    await delete_stored_checkpoints(session, model_name)
    await events.forget(session, subject(run))
    await session.execute(delete(Run).where(Run.id == run.id))


async def runs_on_graph(session: AsyncSession, graph_id: str, *, active_only: bool) -> int:
    """How many runs use the graph (queued or running ones only, with `active_only`)."""
    query = select(func.count()).select_from(Run).where(Run.graph_id == graph_id)
    if active_only:
        query = query.where(Run.status.in_(ACTIVE))
    return await session.scalar(query)


async def iteration_numbers(session: AsyncSession, run_id: str) -> list[int]:
    return list((await session.scalars(select(Iteration.iteration).where(Iteration.run_id == run_id).order_by(Iteration.iteration))).all())
