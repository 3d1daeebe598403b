"""Reads of runs and what they own, and the trajectory store that lets any worker train a run."""

import art
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.knowledge_graph.graph import KnowledgeGraph, NodeScores, ScenarioScores
from app.loop.schemas import EmailTrajectory
from app.runs.models import Iteration, NodeScore, NodeScoreChange, Run, TrajectoryRecord


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
    return graph.initial_scores | moved


# ---------------------------------------------------------------- trajectories


async def replace_trajectories(session: AsyncSession, run_id: str, iteration: int, groups: list[art.TrajectoryGroup]) -> None:
    """Idempotent: a re-run generate step replaces what an interrupted one wrote."""
    await session.execute(delete(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration))
    position = 0
    for group_index, group in enumerate(groups):
        for t in group.trajectories:
            session.add(TrajectoryRecord(
                run_id=run_id, iteration=iteration, position=position, group_index=group_index,
                scenario_id=t.scenario_id, reward=float(t.reward),
                judge_score=t.metrics.get("judge_score"), feedback_score=t.metrics.get("feedback_score"),
                email=t.email.model_dump() if t.email else None, turns=t.turns, trajectory=t.to_json(),
            ))
            position += 1


async def load_groups(session: AsyncSession, run_id: str, iteration: int) -> list[art.TrajectoryGroup]:
    rows = (await session.scalars(
        select(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration)
        .order_by(TrajectoryRecord.position)
    )).all()
    groups: dict[int, list[EmailTrajectory]] = {}
    for row in rows:
        groups.setdefault(row.group_index, []).append(EmailTrajectory.from_json(row.trajectory))
    return [art.TrajectoryGroup(ts) for _, ts in sorted(groups.items())]


# ---------------------------------------------------------------- runs and iterations


async def webhook_secret(session: AsyncSession, run_id: str) -> str:
    return await session.scalar(select(Run.webhook_secret).where(Run.id == run_id))


async def latest_email(session: AsyncSession, run_id: str) -> dict | None:
    return await session.scalar(
        select(Iteration.email).where(Iteration.run_id == run_id).order_by(Iteration.iteration.desc()).limit(1)
    )


def _latest_email_of_run():
    return (
        select(Iteration.email).where(Iteration.run_id == Run.id)
        .order_by(Iteration.iteration.desc()).limit(1).correlate(Run).scalar_subquery()
    )


def run_view(run: Run, latest: dict | None) -> dict:
    return {
        "run_id": run.id, "status": run.status, "config": run.config, "iterations_total": run.iterations_total,
        "iterations_completed": run.iterations_completed, "created_at": run.created_at, "started_at": run.started_at,
        "finished_at": run.finished_at, "error": run.error, "latest_email": latest,
        "final_email": latest if run.status == "succeeded" else None,
    }


async def get_run_view(session: AsyncSession, run_id: str) -> dict | None:
    """The run and its latest email in one query: this is the endpoint clients poll."""
    row = (await session.execute(select(Run, _latest_email_of_run()).where(Run.id == run_id))).first()
    return run_view(*row) if row else None


async def list_runs(session: AsyncSession, *, limit: int, after: str | None, status: str | None) -> tuple[list[dict], bool]:
    query = select(Run, _latest_email_of_run())
    if status:
        query = query.where(Run.status == status)
    if after:
        query = query.where(Run.id < after)
    rows = (await session.execute(query.order_by(Run.id.desc()).limit(limit + 1))).all()
    return [run_view(*row) for row in rows[:limit]], len(rows) > limit


def iteration_view(row: Iteration) -> dict:
    return {
        "iteration": row.iteration, "email": row.email, "rewards": row.rewards, "training": row.training,
        "node_scores_changed": row.node_scores_changed, "metrics": row.metrics, "trace_url": row.trace_url,
        "started_at": row.started_at, "finished_at": row.finished_at,
    }


async def iterations(session: AsyncSession, run_id: str) -> list[dict]:
    rows = (await session.scalars(select(Iteration).where(Iteration.run_id == run_id).order_by(Iteration.iteration))).all()
    return [iteration_view(r) for r in rows]


async def iteration_detail(session: AsyncSession, run_id: str, iteration: int) -> dict | None:
    row = await session.get(Iteration, (run_id, iteration))
    if row is None:
        return None
    trajectories = (await session.scalars(
        select(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration)
        .order_by(TrajectoryRecord.position)
    )).all()
    return iteration_view(row) | {"trajectories": [
        {"scenario_id": t.scenario_id, "reward": t.reward, "judge_score": t.judge_score,
         "feedback_score": t.feedback_score, "email": t.email, "turns": t.turns}
        for t in trajectories
    ]}


async def latest_iteration(session: AsyncSession, run_id: str) -> int | None:
    return await session.scalar(select(Iteration.iteration).where(Iteration.run_id == run_id).order_by(Iteration.iteration.desc()).limit(1))
