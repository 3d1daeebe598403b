"""Outcome rows: written once per event id and tenant, read back per run."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, case, delete, func, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.schemas import Email
from app.loop.features import content_hash, email_features, segment
from app.loop.outcome_model import SentEmail
from app.outcomes.models import EmailRef, OutcomeNonce, OutcomeRecord
from app.outcomes.schemas import OutcomeType
from app.outcomes.verification import Sends


def email_ref(ref: str, email: Email, *, name: str, company: str, role: str, industry: str, **origin) -> EmailRef:
    """What a written email's outcomes find their way back by: where it came from (`origin`: its tenant, graph, run or
    batch, policy, slot…), and the traits of it and of its prospect that the outcome model learns over."""
    return EmailRef(ref=ref, features=email_features(email, name, company, segment(role, industry)),
                    content_hash=content_hash(email), **origin)


@dataclass(frozen=True)
class Origin:
    run_id: str
    iteration: int
    tenant: str


async def origins(session: AsyncSession, refs: set[str]) -> dict[str, Origin]:
    """Where each known ref was written (any tenant's: the caller filters by its own). The refs stay until the
    caller's transaction ends (FOR KEY SHARE on PostgreSQL; SQLite's writers take turns): a deletion of a ref under
    way is waited for, and its ref is then unknown, so no outcome is stored for an email that is gone."""
    if not refs:
        return {}
    rows = await session.execute(
        select(EmailRef.ref, EmailRef.run_id, EmailRef.iteration, EmailRef.tenant).where(EmailRef.ref.in_(refs))
        .with_for_update(read=True, key_share=True)
    )
    return {ref: Origin(run_id, iteration, tenant) for ref, run_id, iteration, tenant in rows}


def _insert(session: AsyncSession):
    return postgresql.insert if session.bind.dialect.name == "postgresql" else sqlite.insert


async def first_use(session: AsyncSession, signing_key: str, nonce: str) -> bool:
    """Records the token as used under the key, in the caller's transaction; False if it was used before."""
    statement = (_insert(session)(OutcomeNonce).values(signing_key=signing_key, nonce=nonce)
                 .on_conflict_do_nothing().returning(OutcomeNonce.nonce))
    return (await session.scalar(statement)) is not None


async def insert_new(session: AsyncSession, rows: list[dict]) -> set[str]:
    """Inserts the rows whose (tenant, event_id) is not stored yet, concurrent inserts included; returns their event ids."""
    insert = _insert(session)
    # One cached statement for every row (SQLAlchemy batches it into multi-row INSERTs itself): a statement
    # of a thousand VALUES rows would be compiled anew for each batch.
    statement = (insert(OutcomeRecord).on_conflict_do_nothing(index_elements=["tenant", "event_id"])
                 .returning(OutcomeRecord.event_id))
    return set((await session.scalars(statement, rows)).all())


REPLIES = (OutcomeType.REPLIED, OutcomeType.AUTO_REPLIED)


async def sends(session: AsyncSession, tenant: str, refs: dict[str, str]) -> dict[str, Sends]:
    """For each ref (→ its run id), the recipients it went to: its prospect's address (a draft's), and every recipient
    of an event its sender reported that is no reply."""
    found = {ref: Sends() for ref in refs}
    drafted = await session.execute(select(EmailRef.ref, EmailRef.recipient, EmailRef.recipient_domain)
                                    .where(EmailRef.ref.in_(refs), EmailRef.recipient.is_not(None)))
    reported = await session.execute(
        select(OutcomeRecord.ref, OutcomeRecord.recipient, OutcomeRecord.recipient_domain).distinct()
        .where(OutcomeRecord.run_id.in_(set(refs.values())), OutcomeRecord.ref.in_(refs), OutcomeRecord.tenant == tenant,
               OutcomeRecord.type.not_in(REPLIES)))
    for ref, recipient, domain in [*drafted, *reported]:
        found[ref].add(recipient, domain)
    return found


async def verify_replies(session: AsyncSession, tenant: str, sent: set[tuple[str, str, str]]) -> None:
    """Replies stored unverified from a recipient (run id, ref, recipient) the sender has since reported a send to."""
    if sent:
        await session.execute(update(OutcomeRecord).where(
            OutcomeRecord.tenant == tenant, OutcomeRecord.run_id.in_({run for run, _, _ in sent}),
            OutcomeRecord.ref.in_({ref for _, ref, _ in sent}), OutcomeRecord.type.in_(REPLIES),
            OutcomeRecord.verified.is_(False),
            tuple_(OutcomeRecord.ref, OutcomeRecord.recipient).in_([(ref, who) for _, ref, who in sent]),
        ).values(verified=True))


async def delivered(session: AsyncSession, iterations: dict[str, int]) -> dict[str, int]:
    """Delivered events (every recipient) of the emails an iteration wrote, for each run's iteration given (one that
    has none is left out)."""
    rows = await session.execute(
        select(OutcomeRecord.run_id, OutcomeRecord.iteration, func.count())
        .where(OutcomeRecord.run_id.in_(iterations), OutcomeRecord.type == OutcomeType.DELIVERED)
        .group_by(OutcomeRecord.run_id, OutcomeRecord.iteration))
    return {run_id: count for run_id, iteration, count in rows if iterations[run_id] == iteration}


async def counts_by_ref(session: AsyncSession, run_id: str
                       ) -> list[tuple[str, int, OutcomeType, bool, str | None, bool, int]]:
    """(ref, iteration, type, machine, sentiment, verified, distinct recipients) for every sent email of the run."""
    rows = await session.execute(
        select(OutcomeRecord.ref, OutcomeRecord.iteration, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment,
               OutcomeRecord.verified, func.count(OutcomeRecord.recipient.distinct()))
        .where(OutcomeRecord.run_id == run_id)
        .group_by(OutcomeRecord.ref, OutcomeRecord.iteration, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment,
                  OutcomeRecord.verified)
    )
    return [tuple(row) for row in rows]


async def recipients_by_ref(session: AsyncSession, run_id: str) -> dict[str, int]:
    """Distinct recipients each email reached in any way (its sends); an unverified reply's sender is none."""
    rows = await session.execute(
        select(OutcomeRecord.ref, func.count(OutcomeRecord.recipient.distinct()))
        .where(OutcomeRecord.run_id == run_id, OutcomeRecord.verified.is_(True)).group_by(OutcomeRecord.ref)
    )
    return dict(rows.all())


async def judge_scores(session: AsyncSession, refs: set[str]) -> dict[str, float | None]:
    """The run's judge's score of each email, as it was written."""
    if not refs:
        return {}
    return dict((await session.execute(select(EmailRef.ref, EmailRef.judge_score).where(EmailRef.ref.in_(refs)))).all())


async def sent_emails(session: AsyncSession, tenant: str, *, mature_before: datetime, graph_id: str | None = None,
                      run_id: str | None = None) -> list[SentEmail]:
    """The tenant's sent emails (on one graph, or of one run) with their mature outcomes, for the outcome model.

    A delivery counts once it is older than the reply window (`mature_before`), or as soon as its recipient replied;
    a reply counts only when verified and from a recipient the email was delivered to (a reply never makes a delivery);
    machine opens, bounces and auto-replies count for nothing.
    """
    per_recipient = (select(
        OutcomeRecord.ref.label("ref"),
        func.max(case((OutcomeRecord.type == OutcomeType.DELIVERED, 1), else_=0)).label("delivered"),
        func.max(case((_mature_delivery(mature_before), 1), else_=0)).label("mature"),
        func.max(case((and_(OutcomeRecord.type == OutcomeType.OPENED, OutcomeRecord.machine.is_(False)), 1), else_=0)).label("opened"),
        func.max(case((_counted_reply(), 1), else_=0)).label("replied"))
        .where(OutcomeRecord.tenant == tenant).group_by(OutcomeRecord.ref, OutcomeRecord.recipient))
    if run_id is not None:
        per_recipient = per_recipient.where(OutcomeRecord.run_id == run_id)
    if graph_id is not None:
        per_recipient = per_recipient.join(EmailRef, EmailRef.ref == OutcomeRecord.ref).where(EmailRef.graph_id == graph_id)
    one = per_recipient.subquery()
    replied = one.c.delivered * one.c.replied
    query = select(one.c.ref, func.sum(case((one.c.mature + replied > 0, 1), else_=0)), func.sum(one.c.opened),
                   func.sum(replied)).group_by(one.c.ref)
    counts = {ref: (int(n or 0), int(o or 0), int(r or 0)) for ref, n, o, r in await session.execute(query)}
    if not counts:
        return []
    traits = await session.execute(select(EmailRef.ref, EmailRef.features, EmailRef.content_hash).where(EmailRef.ref.in_(counts)))
    return [SentEmail(features=features, content_hash=content, delivered=counts[ref][0], opens=counts[ref][1],
                      replies=counts[ref][2]) for ref, features, content in traits]


async def forget_refs(session: AsyncSession, which) -> None:
    """The refs `which` selects (a condition on EmailRef), then their outcomes: in that order, so that outcomes stored
    by an ingestion the deletion had to wait for (it holds the refs) go too."""
    gone = (await session.scalars(delete(EmailRef).where(which).returning(EmailRef.ref))).all()
    for start in range(0, len(gone), 1000):
        await session.execute(delete(OutcomeRecord).where(OutcomeRecord.ref.in_(gone[start:start + 1000])))


def _counted_reply():
    """A reply that counts: verified (`app.outcomes.verification`), no auto-reply."""
    return and_(OutcomeRecord.type == OutcomeType.REPLIED, OutcomeRecord.verified.is_(True))


def _mature_delivery(mature_before: datetime):
    """A delivery older than the reply window: a send without a reply by then counts as one without."""
    return and_(OutcomeRecord.type == OutcomeType.DELIVERED, OutcomeRecord.occurred_at <= mature_before)


def known_draft_sends(tenant: str, graph_id: str, mature_before: datetime):
    """Every sent draft on the graph whose outcome is known (delivered before the reply window closed, or delivered and
    replied to by a verified reply), as a subquery for the caller to count or join: `ref`, `draft_batch_id`, `slot`,
    `policy_id`, `replied` (0 or 1), `replier` (the keyed hash of whoever replied, or null)."""
    mature = func.max(case((_mature_delivery(mature_before), 1), else_=0))
    delivered = func.max(case((OutcomeRecord.type == OutcomeType.DELIVERED, 1), else_=0))
    replied = func.max(case((_counted_reply(), 1), else_=0))
    return (select(EmailRef.ref, EmailRef.draft_batch_id, EmailRef.slot, EmailRef.policy_id,
                   (delivered * replied).label("replied"), func.max(case((_counted_reply(), OutcomeRecord.recipient))).label("replier"))
            .join(OutcomeRecord, OutcomeRecord.ref == EmailRef.ref)
            .where(EmailRef.tenant == tenant, EmailRef.graph_id == graph_id, EmailRef.draft_batch_id.is_not(None))
            .group_by(EmailRef.ref, EmailRef.draft_batch_id, EmailRef.slot, EmailRef.policy_id)
            .having((mature + delivered * replied) > 0).subquery())
