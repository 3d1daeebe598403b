"""Outcome rows: written once per event id and tenant, read back per run."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime

from sqlalchemy import and_, case, delete, func, literal, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.schemas import Email
from app.kit.db import utcnow
from app.loop.features import content_hash, email_features, segment
from app.loop.outcome_model import SentEmail
from app.outcomes.meaning import NOT_COUNTED, REPLY_TYPES, UNSUBSCRIBES, Hold, InterestScale
from app.outcomes.models import EmailRef, OutcomeNonce, OutcomeRecord, Suppression
from app.outcomes.replies import ReplyCategory
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


async def sent_emails(session: AsyncSession, tenant: str, *, mature_before: datetime, scale: InterestScale,
                      graph_id: str | None = None, run_id: str | None = None) -> list[SentEmail]:
    """The tenant's sent emails (on one graph, or of one run) with their mature outcomes, for the outcome model.

    A recipient counts once delivered longer ago than the reply window (`mature_before`), or once delivered as soon as
    a verified reply (or an unsubscribe or complaint) says what the email meant to them; their replies weigh as the
    interest `scale` says. A reply never makes a delivery; machine opens, bounces, out-of-office, auto-replies and
    unverified replies count for nothing.
    """
    per = interest_by_recipient(scale, mature_before).where(OutcomeRecord.tenant == tenant)
    if run_id is not None:
        per = per.where(OutcomeRecord.run_id == run_id)
    if graph_id is not None:
        per = per.join(EmailRef, EmailRef.ref == OutcomeRecord.ref).where(EmailRef.graph_id == graph_id)
    per = per.subquery()
    rows = await session.execute(select(per.c.ref, func.sum(per.c.known), func.sum(per.c.opened), func.sum(per.c.gain),
                                        func.sum(per.c.harm)).group_by(per.c.ref))
    counts = {ref: (int(n or 0), int(o or 0), float(g or 0), float(h or 0)) for ref, n, o, g, h in rows}
    if not counts:
        return []
    traits = await session.execute(select(EmailRef.ref, EmailRef.features, EmailRef.content_hash).where(EmailRef.ref.in_(counts)))
    return [SentEmail(features=features, content_hash=content, delivered=counts[ref][0], opens=counts[ref][1],
                      positive=counts[ref][2], negative=counts[ref][3]) for ref, features, content in traits]


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


def known_draft_sends(tenant: str, graph_id: str, mature_before: datetime, scale: InterestScale):
    """Every sent draft on the graph whose outcome is known (delivered before the reply window closed, or delivered and
    answered by a verified reply, an unsubscribe or a complaint), as a subquery for the caller to count or join: `ref`,
    `draft_batch_id`, `slot`, `policy_id`, `replied` (0 or 1), `positive` (0 or 1: a verified reply the interest
    `scale` puts above 0), `unsubscribed` (0 or 1: an unsubscribe or a complaint), `replier` (the keyed hash of whoever
    replied, verified, or null)."""
    mature = func.max(case((_mature_delivery(mature_before), 1), else_=0))
    delivered = func.max(case((OutcomeRecord.type == OutcomeType.DELIVERED, 1), else_=0))
    replied = delivered * func.max(case((_counted_reply(), 1), else_=0))
    positive = delivered * func.max(case((and_(OutcomeRecord.type.in_(REPLY_TYPES), OutcomeRecord.verified.is_(True),
                                               OutcomeRecord.category.in_([c.value for c in scale.positive])), 1),
                                         else_=0))
    unsubscribed = func.max(case((and_(OutcomeRecord.verified.is_(True),
                                       OutcomeRecord.category.in_([c.value for c in UNSUBSCRIBES])), 1), else_=0))
    return (select(EmailRef.ref, EmailRef.draft_batch_id, EmailRef.slot, EmailRef.policy_id, replied.label("replied"),
                   positive.label("positive"), unsubscribed.label("unsubscribed"),
                   func.max(case((_counted_reply(), OutcomeRecord.recipient))).label("replier"))
            .join(OutcomeRecord, OutcomeRecord.ref == EmailRef.ref)
            .where(EmailRef.tenant == tenant, EmailRef.graph_id == graph_id, EmailRef.draft_batch_id.is_not(None))
            .group_by(EmailRef.ref, EmailRef.draft_batch_id, EmailRef.slot, EmailRef.policy_id)
            .having((mature + replied + unsubscribed) > 0).subquery())


# ---------------------------------------------------------------- what replies meant, and suppression


async def draft_origins(session: AsyncSession, refs: set[str]) -> dict[str, tuple[str | None, str | None]]:
    """Each ref's draft batch and prospect (both None for a run's email)."""
    if not refs:
        return {}
    rows = await session.execute(select(EmailRef.ref, EmailRef.draft_batch_id, EmailRef.prospect_id)
                                 .where(EmailRef.ref.in_(refs)))
    return {ref: (batch, prospect) for ref, batch, prospect in rows}


def reply_page_query(tenant: str, *, run_id: str | None = None, batch_id: str | None = None, after: int = 0):
    """A run's replies (to the emails its iterations wrote, not to its policies' drafts) or a draft batch's, oldest
    first, each with its ref's prospect: rows of (OutcomeRecord, prospect_id, draft_batch_id)."""
    query = (select(OutcomeRecord, EmailRef.prospect_id, EmailRef.draft_batch_id)
             .join(EmailRef, EmailRef.ref == OutcomeRecord.ref)
             .where(OutcomeRecord.tenant == tenant, OutcomeRecord.type.in_(REPLY_TYPES), OutcomeRecord.id > after))
    if run_id is not None:
        query = query.where(OutcomeRecord.run_id == run_id, EmailRef.draft_batch_id.is_(None))
    if batch_id is not None:
        query = query.where(EmailRef.draft_batch_id == batch_id)
    return query.order_by(OutcomeRecord.id)


async def reply_of(session: AsyncSession, row_id: int, tenant: str):
    """One reply of the tenant's, with its ref's prospect and batch; None when there is none (or another tenant's)."""
    row = (await session.execute(
        select(OutcomeRecord, EmailRef.prospect_id, EmailRef.draft_batch_id)
        .join(EmailRef, EmailRef.ref == OutcomeRecord.ref)
        .where(OutcomeRecord.id == row_id, OutcomeRecord.tenant == tenant, OutcomeRecord.type.in_(REPLY_TYPES))
        .with_for_update(of=OutcomeRecord))).first()
    return tuple(row) if row is not None else None


async def categories_by_ref(session: AsyncSession, refs: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per ref, its replies' distinct recipients by category (a recipient who replied twice in two categories counts
    in both)."""
    refs = list(refs)
    out: dict[str, dict[str, int]] = {}
    for start in range(0, len(refs), 1000):
        rows = await session.execute(
            select(OutcomeRecord.ref, OutcomeRecord.category, func.count(OutcomeRecord.recipient.distinct()))
            .where(OutcomeRecord.ref.in_(refs[start:start + 1000]), OutcomeRecord.type.in_(REPLY_TYPES),
                   OutcomeRecord.category.is_not(None))
            .group_by(OutcomeRecord.ref, OutcomeRecord.category))
        for ref, category, n in rows:
            out.setdefault(ref, {})[category.value] = n
    return out


async def latest_categories(session: AsyncSession, refs: Iterable[str]) -> dict[str, ReplyCategory]:
    """Per ref, the category of its latest reply (by its date; the later stored one on a tie)."""
    refs = list(refs)
    latest: dict[str, ReplyCategory] = {}
    for start in range(0, len(refs), 1000):
        rows = await session.execute(
            select(OutcomeRecord.ref, OutcomeRecord.category)
            .where(OutcomeRecord.ref.in_(refs[start:start + 1000]), OutcomeRecord.type.in_(REPLY_TYPES),
                   OutcomeRecord.category.is_not(None))
            .order_by(OutcomeRecord.occurred_at, OutcomeRecord.id))
        latest.update(dict(rows.all()))
    return latest


def _weights(scale: InterestScale, weigh) -> dict[str, float]:
    return {category.value: weigh(category) for category in ReplyCategory if weigh(category) > 0}


def interest_by_recipient(scale: InterestScale, mature_before: datetime):
    """Per (ref, recipient): `gain` (the best positive reply's weight on the interest scale, 0..1), `harm` (the worst
    negative one's, 0..1; a provider's unsubscribe or complaint counts as an unsubscribe), `unsubscribed` (0/1), and
    `known` (1 once delivered before the reply window closed, or delivered and answered in any way that counts),
    `opened` (0/1, a human open): a select the caller narrows (by tenant, run or graph) before it is made a subquery.
    Only verified outcomes weigh, and a reply only from a recipient the email was delivered to."""
    gains, harms = _weights(scale, scale.gain), _weights(scale, scale.harm)
    category = OutcomeRecord.category
    verified = OutcomeRecord.verified.is_(True)
    delivered = func.max(case((OutcomeRecord.type == OutcomeType.DELIVERED, 1), else_=0))
    gain = (delivered * func.max(case(*[(and_(verified, category == name), weight) for name, weight in gains.items()],
                                      else_=0.0)) if gains else literal(0.0))
    harm = (func.max(case(*[(and_(verified, category == name), weight) for name, weight in harms.items()], else_=0.0))
            if harms else literal(0.0))
    unsubscribed = func.max(case((and_(verified, category.in_([c.value for c in UNSUBSCRIBES])), 1), else_=0))
    counted = func.max(case((and_(verified, category.is_not(None), category.not_in([c.value for c in NOT_COUNTED])), 1),
                            else_=0))
    mature = func.max(case((_mature_delivery(mature_before), 1), else_=0))
    known = case((mature + delivered * counted + unsubscribed > 0, 1), else_=0)
    opened = func.max(case((and_(OutcomeRecord.type == OutcomeType.OPENED, OutcomeRecord.machine.is_(False)), 1), else_=0))
    return (select(OutcomeRecord.ref, OutcomeRecord.recipient, gain.label("gain"), harm.label("harm"),
                   known.label("known"), opened.label("opened"))
            .group_by(OutcomeRecord.ref, OutcomeRecord.recipient))


async def suppress(session: AsyncSession, tenant: str, holds: dict[str, Hold]) -> None:
    """Suppresses each recipient (by its keyed hash) for the tenant. For good wins over for a while; two whiles keep
    the later end; a recipient suppressed for good keeps its first reason."""
    if not holds:
        return
    insert = _insert(session)
    statement = insert(Suppression)
    now = utcnow()
    permanent = or_(Suppression.until.is_(None), statement.excluded.until.is_(None))
    statement = statement.on_conflict_do_update(index_elements=["tenant", "recipient"], set_={
        "until": case((permanent, None), (statement.excluded.until > Suppression.until, statement.excluded.until),
                      else_=Suppression.until),
        "reason": case((Suppression.until.is_(None), Suppression.reason), else_=statement.excluded.reason),
        "since": case((Suppression.until.is_(None), Suppression.since), else_=statement.excluded.since),
    })
    await session.execute(statement, [{"tenant": tenant, "recipient": recipient, "reason": hold.reason,
                                       "since": now, "until": hold.until} for recipient, hold in holds.items()])


async def suppressed(session: AsyncSession, tenant: str, recipients: Iterable[str], today: date
                     ) -> dict[str, Suppression]:
    """The recipients (keyed hashes) suppressed today, with their suppression."""
    recipients = list(recipients)
    found: dict[str, Suppression] = {}
    for start in range(0, len(recipients), 1000):
        rows = await session.scalars(select(Suppression).where(
            Suppression.tenant == tenant, Suppression.recipient.in_(recipients[start:start + 1000]),
            or_(Suppression.until.is_(None), Suppression.until >= today)))
        found.update({row.recipient: row for row in rows})
    return found


async def unsuppress(session: AsyncSession, tenant: str, recipient: str) -> bool:
    """Lifts the recipient's suppression; False when there was none."""
    gone = await session.scalar(delete(Suppression).returning(Suppression.recipient).where(
        Suppression.tenant == tenant, Suppression.recipient == recipient))
    return gone is not None


async def positive_recipients(session: AsyncSession, refs: Iterable[str], positive: Iterable[ReplyCategory]
                              ) -> dict[str, int]:
    """Per ref, the distinct recipients with a verified reply in one of the `positive` categories."""
    refs, positive = list(refs), [category.value for category in positive]
    out: dict[str, int] = {}
    for start in range(0, len(refs), 1000):
        rows = await session.execute(
            select(OutcomeRecord.ref, func.count(OutcomeRecord.recipient.distinct()))
            .where(OutcomeRecord.ref.in_(refs[start:start + 1000]), OutcomeRecord.type.in_(REPLY_TYPES),
                   OutcomeRecord.verified.is_(True), OutcomeRecord.category.in_(positive)).group_by(OutcomeRecord.ref))
        out.update(dict(rows.all()))
    return out
