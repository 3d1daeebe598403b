"""Who may read, deploy and write with a policy."""

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import NotFound, invalid
from app.knowledge_graph import repository as graphs
from app.policies import repository
from app.policies.models import Deployment
from app.policies.repository import LearnedPolicy
from app.policies.schemas import DeploymentOut, DeploymentRecord, PolicyOut, PolicyRef, policy_id
from app.runs import repository as runs


async def resolve(session: AsyncSession, text: str, tenant: str, *, field: str | None = None) -> LearnedPolicy:
    """The tenant's policy of that id: another tenant's, an unknown run or an unrecorded iteration is not found
    (404 for a path's id; 422 naming `field` for a body's)."""
    ref = PolicyRef.parse(text)
    if ref is None:
        message = f"{text[:120]!r} is no policy id: write '<run_id>@<iteration>' or '<run_id>'"
        raise invalid(field, message) if field else NotFound(message)
    policy = await repository.find(session, ref)
    if policy is None or policy.tenant != tenant:
        message = f"policy {text!r} not found: no such run of yours, or no such iteration recorded"
        raise invalid(field, message) if field else NotFound(message)
    return policy


async def view(session: AsyncSession, policy: LearnedPolicy) -> PolicyOut:
    return PolicyOut(id=policy.id, run_id=policy.run_id, iteration=policy.iteration, graph_id=policy.graph_id,
                     backend=policy.backend, training_step=policy.training_step, created_at=policy.created_at,
                     reward=policy.reward, deployed=await repository.is_deployed(session, policy))


async def deployment(session: AsyncSession, graph_id: str, tenant: str) -> DeploymentOut:
    await _visible_graph(session, graph_id, tenant)
    rows = await repository.history(session, graph_id, tenant)
    records = [DeploymentRecord(policy=policy_id(r.run_id, r.iteration), deployed_at=r.deployed_at) for r in rows]
    return DeploymentOut(graph_id=graph_id, policy=records[0].policy if records else None,
                         deployed_at=records[0].deployed_at if records else None, history=records)


async def deploy(session: AsyncSession, graph_id: str, text: str, tenant: str) -> DeploymentOut:
    """Promotes the policy (a rollback is the promotion of an earlier one). A policy is deployable once its run
    finished: a run's last step prunes checkpoints, and a deployed one must stay."""
    await _visible_graph(session, graph_id, tenant)
    await graphs.lock(session, graph_id)  # promotions of one graph take turns
    policy = await resolve(session, text, tenant, field="policy")
    if policy.graph_id != graph_id:
        raise invalid("policy", f"policy {policy.id!r} was learned on graph {policy.graph_id!r}, not on graph {graph_id!r}")
    if not policy.run_status.terminal:
        raise invalid("policy", f"run {policy.run_id!r} is {policy.run_status}; deploy its policies once it has finished")
    if policy.backend != "embedded" and policy.training_step is not None:
        latest = await runs.latest_iteration(session, policy.run_id)
        if policy.iteration != latest:
            raise invalid("policy", f"backend {policy.backend!r} keeps a finished run's latest and best checkpoints only: "
                                    f"deploy {policy.run_id!r}@{latest}")
    session.add(Deployment(graph_id=graph_id, tenant=tenant, run_id=policy.run_id, iteration=policy.iteration))
    await session.flush()
    return await deployment(session, graph_id, tenant)


async def _visible_graph(session: AsyncSession, graph_id: str, tenant: str) -> None:
    if not await graphs.visible(session, graph_id, tenant):
        raise NotFound(f"graph {graph_id!r} not found")
