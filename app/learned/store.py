"""Kept policies, read by id or by alias: below the runs domain, which keeps them, and above nothing but the tables.

A policy is addressed by its own id (`pol_…`) or by its alias `<run_id>@<k>` (`<run_id>` alone: the run's latest
iteration), which stays valid once the run is deleted.
"""

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.specs import SPECS
from app.kit.pages import fetch_page
from app.learned.models import Deployment, Policy
from app.outcomes import repository as outcomes
from app.outcomes.meaning import InterestScale

ID_PREFIX = "pol_"
_ALIAS = re.compile(r"^(?P<run>[A-Za-z0-9_.:\-]{1,100})(?:@(?P<iteration>\d{1,9}))?$")


@dataclass(frozen=True)
class PolicyRef:
    """An alias as given: a run and an iteration (None: the run's latest recorded one)."""

    run_id: str
    iteration: int | None

    @classmethod
    def parse(cls, text: str) -> "PolicyRef | None":
        """`run_…@k` or `run_…`; None for anything else."""
        match = _ALIAS.match(text.strip())
        if match is None:
            return None
        iteration = match["iteration"]
        return cls(match["run"], None if iteration is None else int(iteration))


def policy_id(run_id: str, iteration: int) -> str:
    """The alias of what a run had learned once iteration k was recorded."""
    return f"{run_id}@{iteration}"


def is_own_id(text: str) -> bool:
    return text.strip().startswith(ID_PREFIX)


async def owned(session: AsyncSession, policy_id_: str, tenant: str) -> Policy | None:
    """The tenant's kept policy of that id; another tenant's is None, as an unknown one."""
    policy = await session.get(Policy, policy_id_.strip())
    return policy if policy is not None and policy.tenant == tenant else None


async def by_source(session: AsyncSession, source: str) -> Policy | None:
    """The policy kept from `<run_id>@<k>`, any tenant's (the caller checks whose)."""
    return await session.scalar(select(Policy).where(Policy.source == source))


async def of_sources(session: AsyncSession, sources: set[str]) -> dict[str, Policy]:
    if not sources:
        return {}
    return {p.source: p for p in (await session.scalars(select(Policy).where(Policy.source.in_(sources)))).all()}


async def page(session: AsyncSession, tenant: str, graph_id: str | None, *, after: str | None, limit: int
               ) -> tuple[list[Policy], bool]:
    """The tenant's kept policies, oldest first (ids sort by creation time)."""
    query = select(Policy).where(Policy.tenant == tenant)
    if graph_id is not None:
        query = query.where(Policy.graph_id == graph_id)
    if after is not None:
        query = query.where(Policy.id > after)
    return await fetch_page(session, query.order_by(Policy.id), limit)


def serving_key(policy: Policy) -> str:
    """What a worker registers to serve the policy's checkpoint under (`Executor.policy`): the policy's own copy
    where the backend stores checkpoints with us, else the run's model at its provider."""
    return policy.id if SPECS[policy.backend].stores_checkpoints else policy.run_id


async def names_checkpoint(session: AsyncSession, model_name: str) -> bool:
    """A kept policy's checkpoint is stored under this model name (a run's, at a provider or in ART's folder)."""
    return await session.scalar(select(Policy.id).where(Policy.checkpoint == model_name).limit(1)) is not None


# ---------------------------------------------------------------- what drafting reads of a deployment


async def current_deployment(session: AsyncSession, graph_id: str, tenant: str) -> Deployment | None:
    return await session.scalar(select(Deployment).where(Deployment.graph_id == graph_id, Deployment.tenant == tenant)
                                .order_by(Deployment.id.desc()).limit(1))


async def sends_by_policy(session: AsyncSession, tenant: str, graph_id: str, mature_before: datetime,
                          scale: InterestScale) -> dict[str, tuple[int, int]]:
    """Per policy id, its drafts on the graph with a known outcome (delivered before the reply window closed, or
    replied to) and how many of them got a positive reply (by the interest `scale`)."""
    known = outcomes.known_draft_sends(tenant, graph_id, mature_before, scale)
    rows = await session.execute(
        select(known.c.policy_id, func.count(), func.sum(known.c.positive)).group_by(known.c.policy_id))
    return {policy: (sends, int(replies or 0)) for policy, sends, replies in rows}
