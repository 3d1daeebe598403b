"""Evaluations as the API takes them in and gives them back."""

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import Services
from app.evaluations import queue
from app.evaluations.schemas import (
    ACTIVE,
    EvaluationCreated,
    EvaluationIn,
    EvaluationLinks,
    EvaluationOut,
    EvaluationStatus,
)
from app.events.service import new_id
from app.kit import durable
from app.kit.db import serialize_on, utcnow
from app.kit.errors import Conflict, NotFound, TooManyRequests, invalid
from app.kit.pages import newest_first
from app.knowledge_graph import repository as graphs
from app.learned.models import Evaluation
from app.policies import service as policies
from app.policies.events import EvaluationFailedData

RETRY_AFTER_S = 30  # over the cap of active evaluations
ORPHAN_AFTER = timedelta(minutes=1)  # queued with no workflow this long after its creation: its enqueue was lost


async def create(svc: Services, body: EvaluationIn, tenant: str) -> EvaluationCreated:
    async with svc.db.transaction() as session:
        await serialize_on(session, f"evaluations-of-tenant:{tenant}")  # the cap's count and the insert, in turn
        active = await session.scalar(select(func.count()).select_from(Evaluation).where(
            Evaluation.tenant == tenant, Evaluation.status.in_(ACTIVE)))
        if active >= svc.settings.max_active_evaluations_per_tenant:
            cap = svc.settings.max_active_evaluations_per_tenant
            raise TooManyRequests(f"{active} evaluations are queued or running, the cap "
                                  f"MAX_ACTIVE_EVALUATIONS_PER_TENANT={cap}; retry when one ends (or cancel one)",
                                  retry_after_s=RETRY_AFTER_S)
        if not await graphs.visible(session, body.graph_id, tenant):
            raise invalid("graph_id", f"unknown graph {body.graph_id!r}; see GET /graphs")
        resolved = [await policies.deployable(session, text, tenant, body.graph_id, f"policies.{i}", svc.settings)
                    for i, text in enumerate(body.policies)]
        ids = [p.source for p in resolved]
        if (twice := next((i for i, policy in enumerate(ids) if policy in ids[:i]), None)) is not None:
            raise invalid(f"policies.{twice}", f"{body.policies[twice]!r} is {ids[twice]!r}, which the list names before")
        evaluation = Evaluation(id=new_id("evl"), tenant=tenant, graph_id=body.graph_id, policies=ids,
                                policy_ids=[p.id for p in resolved], status=EvaluationStatus.QUEUED,
                                prospects=[p.model_dump(mode="json") for p in body.prospects] if body.prospects else None)
        session.add(evaluation)
    await queue.enqueue(evaluation.id, tenant)
    return EvaluationCreated(evaluation_id=evaluation.id, status=EvaluationStatus.QUEUED,
                             links=EvaluationLinks(self=f"/evaluations/{evaluation.id}"))


async def cancel(svc: Services, evaluation_id: str, tenant: str) -> EvaluationOut:
    """A queued or running evaluation ends `cancelled`: no result, nothing promoted. A finished one is a 409."""
    async with svc.db.transaction() as session:
        evaluation = await session.get(Evaluation, evaluation_id, with_for_update=True)
        if evaluation is None or evaluation.tenant != tenant:
            raise NotFound(f"evaluation {evaluation_id!r} not found")
        if evaluation.status not in ACTIVE:
            raise Conflict(f"evaluation {evaluation_id!r} is {evaluation.status}; only a queued or running evaluation "
                           "can be cancelled")
        evaluation.status, evaluation.finished_at = EvaluationStatus.CANCELLED, utcnow()
        out = view(evaluation)
    await queue.cancel(evaluation_id)
    return out


async def fail(session: AsyncSession, evaluation: Evaluation, message: str) -> None:
    """The evaluation failed, saying why, announced on its graph, in the caller's transaction (holding its row)."""
    evaluation.status, evaluation.error = EvaluationStatus.FAILED, {"message": message}
    evaluation.finished_at = utcnow()
    await graphs.lock(session, evaluation.graph_id)  # the graph's events take turns
    await policies.announce(session, evaluation.graph_id, evaluation.tenant, EvaluationFailedData,
                            evaluation=evaluation.id, policies=evaluation.policies, error=message)


async def end_orphans(svc: Services) -> list[str]:
    """Evaluations left queued or running with nothing to end them: one whose workflow ended without ending it (a
    step failed through a database outage of minutes), or belongs to another version (an upgrade mid-evaluation),
    fails; one whose enqueue a crash lost is enqueued. Returns the evaluations it failed."""
    async with svc.db.read() as session:
        active = (await session.scalars(select(Evaluation).where(Evaluation.status.in_(ACTIVE)))).all()
    states = await durable.states([evaluation.id for evaluation in active])
    ended = []
    for evaluation in active:
        state = states.get(evaluation.id)
        lost = evaluation.status == EvaluationStatus.QUEUED and utcnow() - evaluation.created_at > ORPHAN_AFTER
        if state is None and lost:
            await queue.enqueue(evaluation.id, evaluation.tenant)  # idempotent
        elif state is not None and state.abandoned:
            if state.stale:
                await durable.cancel(evaluation.id)  # it would hold its queue slot
            why = ("the service was upgraded while the evaluation was in flight; start it again" if state.stale else
                   f"the evaluation's workflow ended ({state.status}) without ending it; see the server log")
            async with svc.db.transaction() as session:
                locked = await session.get(Evaluation, evaluation.id, with_for_update=True)
                if locked is not None and locked.status in ACTIVE:
                    await fail(session, locked, why)
                    ended.append(evaluation.id)
    return ended


async def page(session: AsyncSession, tenant: str, graph_id: str | None, *, after: str | None, limit: int
               ) -> tuple[list[EvaluationOut], bool]:
    """Newest first."""
    rows, more = await newest_first(session, Evaluation, tenant=tenant, graph_id=graph_id, after=after, limit=limit)
    return [view(row) for row in rows], more


async def get(session: AsyncSession, evaluation_id: str, tenant: str) -> EvaluationOut:
    evaluation = await session.get(Evaluation, evaluation_id)
    if evaluation is None or evaluation.tenant != tenant:
        raise NotFound(f"evaluation {evaluation_id!r} not found")
    return view(evaluation)


def view(evaluation: Evaluation) -> EvaluationOut:
    return EvaluationOut(evaluation_id=evaluation.id, graph_id=evaluation.graph_id, policies=evaluation.policies,
                         policy_ids=evaluation.policy_ids,
                         status=evaluation.status, result=evaluation.result, error=evaluation.error,
                         created_at=evaluation.created_at, finished_at=evaluation.finished_at)
