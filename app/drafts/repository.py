"""Every query of the drafts domain: batches, their drafts, and the refs and outcomes of the emails they hold."""

from collections.abc import Sequence

from sqlalchemy import and_, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import BatchStatus
from app.outcomes import repository as outcomes
from app.outcomes.meaning import InterestScale
from app.outcomes.models import EmailRef, OutcomeRecord


async def by_idempotency_key(session: AsyncSession, tenant: str, key: str) -> DraftBatch | None:
    return await session.scalar(select(DraftBatch).where(DraftBatch.tenant == tenant, DraftBatch.idempotency_key == key))


async def active(session: AsyncSession) -> Sequence[DraftBatch]:
    """Every tenant's batches queued or running."""
    return (await session.scalars(select(DraftBatch).where(
        DraftBatch.status.in_((BatchStatus.QUEUED, BatchStatus.RUNNING))))).all()


async def active_batches(session: AsyncSession, tenant: str) -> int:
    """The tenant's batches queued or running."""
    return await session.scalar(select(func.count()).select_from(DraftBatch).where(
        DraftBatch.tenant == tenant, DraftBatch.status.in_((BatchStatus.QUEUED, BatchStatus.RUNNING))))


async def pending(session: AsyncSession, batch_id: str, start: int, end: int) -> Sequence[Draft]:
    """The chunk's drafts not drafted yet, in prospect order."""
    return (await session.scalars(select(Draft).where(
        Draft.batch_id == batch_id, Draft.position >= start, Draft.position < end, Draft.drafted_at.is_(None))
        .order_by(Draft.position))).all()


async def store_drafted(session: AsyncSession, batch_id: str, position: int, **drafted) -> bool:
    """The draft's email, once: False when a step that ran before stored it already."""
    done = await session.execute(update(Draft).where(
        Draft.batch_id == batch_id, Draft.position == position, Draft.drafted_at.is_(None)).values(**drafted))
    return done.rowcount == 1


async def count_completed(session: AsyncSession, batch_id: str, stored: int) -> None:
    await session.execute(update(DraftBatch).where(DraftBatch.id == batch_id).values(
        completed=DraftBatch.completed + stored))


async def drafts(session: AsyncSession, batch_id: str, *, after: int = -1, limit: int | None = None) -> Sequence[Draft]:
    """In prospect order, after a position (the drafts' order in the request, from 0)."""
    query = select(Draft).where(Draft.batch_id == batch_id, Draft.position > after).order_by(Draft.position)
    return (await session.scalars(query if limit is None else query.limit(limit))).all()


async def arms_by_batch(session: AsyncSession, tenant: str, graph_id: str) -> dict[str, list]:
    """Per draft batch on the graph, the policies that drafted it with their shares."""
    rows = await session.execute(select(DraftBatch.id, DraftBatch.arms).where(
        DraftBatch.tenant == tenant, DraftBatch.graph_id == graph_id))
    return {batch: arms or [] for batch, arms in rows}


async def logged_sends(session: AsyncSession, tenant: str, graph_id: str, mature_before, scale: InterestScale) -> list:
    """Every sent draft on the graph whose outcome is known, with the traffic decision logged when it was drafted:
    rows of (`batch`, `policy_id` that wrote it, `propensity` that policy had of being chosen, `positive` 0/1 (a
    verified positive reply by the interest `scale`), `unsubscribed` 0/1 (an unsubscribe or a complaint), `prospect`,
    `replier`: the keyed hash of whoever replied, verified, or None, `replied` 0/1: a verified reply of any kind)."""
    known = outcomes.known_draft_sends(tenant, graph_id, mature_before, scale)
    return (await session.execute(
        select(known.c.draft_batch_id.label("batch"), known.c.policy_id, Draft.propensity, known.c.positive,
               known.c.unsubscribed, Draft.prospect, known.c.replier, known.c.replied)
        .join(Draft, and_(Draft.batch_id == known.c.draft_batch_id, Draft.position == known.c.slot)))).all()


def _refs_of(policy_id: str):
    """The refs of the drafts the policy wrote, or its batches hold (a batch goes with the policy it was drafted by)."""
    batches = select(DraftBatch.id).where(DraftBatch.policy_id == policy_id)
    return EmailRef.draft_batch_id.is_not(None) & ((EmailRef.policy_id == policy_id) | EmailRef.draft_batch_id.in_(batches))


async def sent_drafts(session: AsyncSession, policy_id: str) -> int:
    """Sent drafts (with a recorded outcome) deleting the policy deletes: those it wrote, and every draft of the
    batches it drafted as the champion. They are logged sends that evaluations of the policies drafting beside them
    read."""
    return await session.scalar(select(func.count(func.distinct(EmailRef.ref)))
                                .join(OutcomeRecord, OutcomeRecord.ref == EmailRef.ref).where(_refs_of(policy_id)))


async def discard_refs(session: AsyncSession, policy_id: str) -> None:
    """The refs of the drafts the policy wrote or its batches hold, with their outcomes: before the policy's deletion
    takes its batches."""
    await outcomes.forget_refs(session, _refs_of(policy_id))


async def refs_and_outcomes(session: AsyncSession, batch_id: str) -> tuple[dict[str, str], list]:
    """The batch's refs (ref → prospect id, in prospect order) and their outcomes' distinct recipients, by kind:
    rows of (ref, type, machine, sentiment, verified, recipients)."""
    refs = dict((await session.execute(select(EmailRef.ref, EmailRef.prospect_id).where(EmailRef.draft_batch_id == batch_id)
                                        .order_by(EmailRef.slot))).all())
    if not refs:
        return {}, []
    rows = await session.execute(
        select(OutcomeRecord.ref, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment,
               OutcomeRecord.verified, func.count(OutcomeRecord.recipient.distinct()))
        .where(OutcomeRecord.ref.in_(refs))
        .group_by(OutcomeRecord.ref, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment,
                  OutcomeRecord.verified))
    return refs, rows.all()
