"""Run lifecycle in the database: creation, reads, and the transactions the workflow commits."""

import hashlib
import json
import secrets
import time
from datetime import datetime

import art
from openai.types.chat.chat_completion import Choice
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import utcnow
from app.knowledge_graph.graph import KnowledgeGraph
from app.loop.rollout import email_of
from app.runs.models import Event, IdempotencyKey, Iteration, NodeScore, NodeScoreChange, Run, TrajectoryRecord
from app.webhooks.models import WebhookDelivery

TERMINAL = ("succeeded", "failed", "cancelled")
FULL_SCORES_MAX_NODES = 2000
TRUNCATED_TOP = 500


class Conflict(Exception):
    pass


def new_id(prefix: str) -> str:
    """Sortable by creation time, so pagination can use the id as its cursor."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def request_hash(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


async def find_idempotent(session: AsyncSession, key: str, body_hash: str) -> Run | None:
    record = await session.get(IdempotencyKey, key)
    if record is None:
        return None
    if record.request_hash != body_hash:
        raise Conflict(f"Idempotency-Key {key!r} was already used with a different request body")
    return await session.get(Run, record.run_id)


# ---------------------------------------------------------------- events


async def emit(session: AsyncSession, run: Run, type: str, data: dict) -> Event:
    """An event, and its webhook delivery when the run has a receiver: one transaction (the outbox)."""
    run.last_seq += 1
    event = Event(
        id=new_id("evt"), run_id=run.id, seq=run.last_seq, type=type,
        data={"run_id": run.id, "seq": run.last_seq, **data}, created_at=utcnow(),
    )
    session.add(event)
    if run.webhook_url:
        await session.flush()
        session.add(WebhookDelivery(
            event_id=event.id, run_id=run.id, type=type, url=run.webhook_url, status="pending",
            attempts=0, next_attempt_at=event.created_at, created_at=event.created_at,
        ))
    return event


async def locked_run(session: AsyncSession, run_id: str) -> Run:
    run = await session.get(Run, run_id, with_for_update=True, populate_existing=True)
    if run is None:
        raise LookupError(f"run {run_id!r} not found")
    return run


# ---------------------------------------------------------------- node scores


async def current_scores(session: AsyncSession, run_id: str) -> dict[str, float]:
    """Only the scores that moved from 1.0; every other node of the graph is at 1.0."""
    rows = await session.execute(select(NodeScore.node_id, NodeScore.score).where(NodeScore.run_id == run_id))
    return dict(rows.tuples().all())


async def scores_after(session: AsyncSession, run_id: str, iteration: int) -> dict[str, float]:
    rows = await session.execute(
        select(NodeScoreChange.node_id, NodeScoreChange.score)
        .where(NodeScoreChange.run_id == run_id, NodeScoreChange.iteration <= iteration)
        .order_by(NodeScoreChange.iteration)
    )
    return dict(rows.tuples().all())


def full_scores(graph: KnowledgeGraph, moved: dict[str, float]) -> dict[str, float]:
    return graph.initial_scores | moved


def webhook_scores(graph: KnowledgeGraph, moved: dict[str, float], changed: dict[str, float]) -> dict:
    if len(graph.nodes) <= FULL_SCORES_MAX_NODES:
        return {"node_scores": full_scores(graph, moved)}
    top = sorted(moved.items(), key=lambda kv: -kv[1])[:TRUNCATED_TOP]
    if len(top) < TRUNCATED_TOP:  # pad with unmoved nodes, all at 1.0
        for node_id in graph.nodes:
            if len(top) >= TRUNCATED_TOP:
                break
            if node_id not in moved:
                top.append((node_id, 1.0))
    return {"node_scores": dict(top) | changed, "truncated": True}


# ---------------------------------------------------------------- trajectories


def trajectory_json(trajectory: art.Trajectory) -> dict:
    items = [c.model_dump(mode="json") if isinstance(c, Choice) else dict(c) for c in trajectory.messages_and_choices]
    return {
        "messages_and_choices": items, "tools": trajectory.tools, "reward": trajectory.reward,
        "metrics": trajectory.metrics, "metadata": trajectory.metadata, "logs": trajectory.logs,
    }


def trajectory_from_json(data: dict) -> art.Trajectory:
    items = [Choice.model_validate(i) if "message" in i and "finish_reason" in i else i for i in data["messages_and_choices"]]
    return art.Trajectory(
        messages_and_choices=items, tools=data.get("tools"), reward=data["reward"],
        metrics=data.get("metrics", {}), metadata=data.get("metadata", {}), logs=data.get("logs", []),
    )


async def replace_trajectories(session: AsyncSession, run_id: str, iteration: int, groups: list[art.TrajectoryGroup]) -> None:
    """Idempotent: a re-run generate step replaces what an interrupted one wrote."""
    await session.execute(delete(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration))
    position = 0
    for group_index, group in enumerate(groups):
        for t in group.trajectories:
            email = email_of(t)
            session.add(TrajectoryRecord(
                run_id=run_id, iteration=iteration, position=position, group_index=group_index,
                scenario_id=str(t.metadata["scenario_id"]), reward=float(t.reward),
                judge_score=t.metrics.get("judge_score"), feedback_score=t.metrics.get("feedback_score"),
                email=email.model_dump() if email else None, turns=int(t.metadata.get("turns", 0)),
                trajectory=trajectory_json(t),
            ))
            position += 1


async def load_groups(session: AsyncSession, run_id: str, iteration: int) -> list[art.TrajectoryGroup]:
    rows = (await session.scalars(
        select(TrajectoryRecord).where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration == iteration)
        .order_by(TrajectoryRecord.position)
    )).all()
    groups: dict[int, list[art.Trajectory]] = {}
    for row in rows:
        groups.setdefault(row.group_index, []).append(trajectory_from_json(row.trajectory))
    return [art.TrajectoryGroup(ts) for _, ts in sorted(groups.items())]


# ---------------------------------------------------------------- workflow transactions


async def begin(session: AsyncSession, run_id: str) -> Run:
    run = await locked_run(session, run_id)
    if run.status == "queued":
        run.status, run.started_at = "running", run.started_at or utcnow()
        await emit(session, run, "run.started", {"status": "running", "attempt": run.attempt})
    return run


async def resume(session: AsyncSession, run_id: str) -> Run:
    """A failed run starts again from its last recorded iteration, as a new workflow attempt."""
    run = await locked_run(session, run_id)
    if run.status != "failed":
        raise Conflict(f"run {run_id} is {run.status}; only failed runs can be resumed")
    run.status, run.error, run.finished_at = "queued", None, None
    run.attempt += 1
    return run


async def record_iteration(
    session: AsyncSession, graph: KnowledgeGraph, run_id: str, iteration: int, *,
    email: dict | None, rewards: dict | None, training: dict | None, changed: dict[str, float],
    metrics: dict[str, float], started_at: datetime, trace_url: str | None = None,
) -> bool:
    """The iteration, its score changes and its event, exactly once; False if already there or cancelled."""
    run = await locked_run(session, run_id)
    if run.status != "running" or await session.get(Iteration, (run_id, iteration)) is not None:
        return False
    finished_at = utcnow()
    session.add(Iteration(
        run_id=run_id, iteration=iteration, email=email, rewards=rewards, training=training,
        node_scores_changed=changed, metrics=metrics, trace_url=trace_url, started_at=started_at, finished_at=finished_at,
    ))
    for node_id, score in changed.items():
        await session.merge(NodeScore(run_id=run_id, node_id=node_id, score=score))
        session.add(NodeScoreChange(run_id=run_id, iteration=iteration, node_id=node_id, score=score))
    await session.flush()
    if iteration > 0:
        run.iterations_completed = iteration
    moved = await current_scores(session, run_id)
    await emit(session, run, "iteration.completed", {
        "iteration": iteration, "email": email, "rewards": rewards, **webhook_scores(graph, moved, changed),
    })
    return True


async def finish(session: AsyncSession, run_id: str) -> None:
    run = await locked_run(session, run_id)
    if run.status != "running":
        return
    run.status, run.finished_at = "succeeded", utcnow()
    await emit(session, run, "run.succeeded", {
        "status": "succeeded", "iterations_completed": run.iterations_completed,
        "final_email": await latest_email(session, run_id),
    })


async def fail(session: AsyncSession, run_id: str, step: str, message: str) -> None:
    run = await locked_run(session, run_id)
    if run.status in TERMINAL:
        return
    run.status, run.finished_at = "failed", utcnow()
    run.error = {"message": message, "step": step}
    await emit(session, run, "run.failed", {"status": "failed", "iterations_completed": run.iterations_completed, "error": run.error})


async def cancel(session: AsyncSession, run_id: str) -> Run:
    run = await locked_run(session, run_id)
    if run.status in TERMINAL:
        raise Conflict(f"run {run_id} already {run.status}; only queued or running runs can be cancelled")
    run.status, run.finished_at = "cancelled", utcnow()
    await emit(session, run, "run.cancelled", {
        "status": "cancelled", "iterations_completed": run.iterations_completed,
        "final_email": await latest_email(session, run_id),
    })
    return run


# ---------------------------------------------------------------- reads


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


async def events_page(session: AsyncSession, run_id: str, *, after: int, limit: int) -> tuple[list[Event], bool]:
    rows = (await session.scalars(
        select(Event).where(Event.run_id == run_id, Event.seq > after).order_by(Event.seq).limit(limit + 1)
    )).all()
    return list(rows[:limit]), len(rows) > limit

