"""Policies as runs recorded them (an iteration's learned state, read live while the run exists), and deployments."""

import itertools
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete as sql_delete
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.specs import SPECS, delete_stored_checkpoints
from app.learned import store
from app.learned.models import Deployment, Evaluation, Policy
from app.learned.store import PolicyRef, policy_id
from app.loop.schemas import TrainingOutcome
from app.runs import repository as runs
from app.runs.models import Iteration, Run
from app.runs.schemas import EffectiveConfig
from app.runs.status import RunStatus


@dataclass(frozen=True)
class LearnedPolicy:
    """A run's learned state after iteration k: which checkpoint, and where its node scores and lessons are kept."""

    run_id: str
    iteration: int
    graph_id: str
    tenant: str
    config: EffectiveConfig
    run_status: RunStatus
    training_step: int | None
    reward: dict | None
    created_at: datetime

    @property
    def id(self) -> str:
        return policy_id(self.run_id, self.iteration)

    @property
    def backend(self) -> str:
        return self.config.backend


def _policy(run: Run, row: Iteration) -> LearnedPolicy:
    config = run.effective_config
    step = None
    if SPECS[config.backend].trainable:
        step = TrainingOutcome.model_validate(row.training).step if row.training else 0
    return LearnedPolicy(run_id=run.id, iteration=row.iteration, graph_id=run.graph_id, tenant=run.tenant, config=config,
                         run_status=run.status, training_step=step, reward=row.rewards, created_at=row.finished_at)


async def find(session: AsyncSession, ref: PolicyRef, tenant: str) -> LearnedPolicy | None:
    """The tenant's policy, or None: no such run of the tenant's, or no such iteration recorded. The tenant is part of
    the one query that finds the run, so another tenant's run costs what a missing one does (no timing tells them
    apart)."""
    run = await session.scalar(select(Run).where(Run.id == ref.run_id, Run.tenant == tenant))
    if run is None:
        return None
    iteration = ref.iteration if ref.iteration is not None else await runs.latest_iteration(session, run.id)
    row = None if iteration is None else await session.get(Iteration, (run.id, iteration))
    return None if row is None else _policy(run, row)


async def of_run(session: AsyncSession, run: Run, *, after: int, limit: int) -> tuple[list[LearnedPolicy], bool]:
    """A run's policies, one per recorded iteration, by iteration, from `after` + 1."""
    rows = (await session.scalars(select(Iteration).where(Iteration.run_id == run.id, Iteration.iteration > after)
                                  .order_by(Iteration.iteration).limit(limit + 1))).all()
    return [_policy(run, row) for row in rows[:limit]], len(rows) > limit


# ---------------------------------------------------------------- deployments


async def history(session: AsyncSession, graph_id: str, tenant: str) -> list[Deployment]:
    """Every deployment of the graph by the tenant (a shared graph, the demo, has one per tenant), the current one first."""
    return list((await session.scalars(select(Deployment).where(Deployment.graph_id == graph_id, Deployment.tenant == tenant)
                                       .order_by(Deployment.id.desc()))).all())


async def was_champion(session: AsyncSession, graph_id: str, tenant: str, policy_id_: str) -> bool:
    """The policy was the graph's champion in a deployment recorded before (promoting it again is a rollback)."""
    return await session.scalar(select(Deployment.id).where(
        Deployment.graph_id == graph_id, Deployment.tenant == tenant, Deployment.policy_id == policy_id_)
        .limit(1)) is not None


EVALUATIONS_PAGE = 50


async def latest_evaluation(session: AsyncSession, graph_id: str, tenant: str, policies: set[str]) -> Evaluation | None:
    """The tenant's latest finished evaluation on the graph that compares all of these policies, however many others
    came since (read newest first, a page at a time)."""
    query = (select(Evaluation).where(Evaluation.tenant == tenant, Evaluation.graph_id == graph_id,
                                      Evaluation.status == "succeeded")
             .order_by(Evaluation.created_at.desc(), Evaluation.id.desc()).limit(EVALUATIONS_PAGE))
    for offset in itertools.count(0, EVALUATIONS_PAGE):
        rows = (await session.scalars(query.offset(offset))).all()
        if found := next((row for row in rows if policies <= set(row.policies)), None):
            return found
        if len(rows) < EVALUATIONS_PAGE:
            return None


async def deployed(session: AsyncSession, policy: Policy) -> bool:
    """The current deployment of the policy's graph (a policy deploys on its own graph only) drafts with it, as its
    champion or a challenger."""
    deployment = await store.current_deployment(session, policy.graph_id, policy.tenant)
    return deployment is not None and (deployment.policy_id == policy.id or any(
        c.policy_id == policy.id for c in deployment.challengers or []))


async def is_deployed(session: AsyncSession, graph_id: str, tenant: str, source: str) -> bool:
    """The policy (by alias) is the champion of its graph's current deployment."""
    deployment = await store.current_deployment(session, graph_id, tenant)
    return deployment is not None and policy_id(deployment.run_id, deployment.iteration) == source


async def delete(session: AsyncSession, policy: Policy) -> None:
    """The policy, its batches with their drafts (ON DELETE CASCADE) and its own checkpoint copy, in the caller's
    transaction."""
    if policy.checkpoint is not None and SPECS[policy.backend].stores_checkpoints:
        await delete_stored_checkpoints(session, policy.checkpoint)
    await session.execute(sql_delete(Policy).where(Policy.id == policy.id))
