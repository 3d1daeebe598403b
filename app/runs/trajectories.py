"""The trajectory store that lets any worker train a run: an iteration's groups, written once and read back as ART's."""

import art
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.knowledge_graph.graph import KnowledgeGraph
from app.loop.trajectory import EmailTrajectory
from app.outcomes import refs
from app.outcomes.models import EmailRef
from app.runs.models import Run, TrajectoryRecord
from app.runs.repository import email_ref, feedback_source


async def replace_trajectories(session: AsyncSession, run: Run, graph: KnowledgeGraph, iteration: int,
                               groups: list[art.TrajectoryGroup], message_id_domain: str) -> None:
    """Idempotent: a re-run generate step replaces what an interrupted one wrote (with the same refs)."""
    run_id = run.id
    await session.execute(delete(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration))
    await session.execute(delete(EmailRef).where(EmailRef.run_id == run_id, EmailRef.iteration == iteration,
                                                 EmailRef.slot != refs.PUBLISHED))
    position = 0
    for group_index, group in enumerate(groups):
        for t in group.trajectories:
            email = None
            if t.email is not None:
                traced = email_ref(run, graph, iteration, position, t.scenario_id, t.email, t.metrics.get("judge_score"))
                email = t.email.model_dump() | {"ref": traced.ref, "message_id": refs.message_id(traced.ref, message_id_domain)}
                session.add(traced)
            session.add(TrajectoryRecord(
                run_id=run_id, iteration=iteration, position=position, group_index=group_index,
                scenario_id=t.scenario_id, reward=float(t.reward),
                judge_score=t.metrics.get("judge_score"), feedback_score=t.metrics.get("feedback_score"),
                feedback_source=feedback_source(t.metrics), feedback_confidence=t.metrics.get("feedback_confidence"),
                email=email, turns=t.turns, trajectory=t.to_json(),
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
