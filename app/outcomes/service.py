"""Taking outcomes in (from the caller, a provider's webhook or a reply) and reading them back per run."""

import math
import time
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime

import polars as pl
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.schemas import Email
from app.events.service import new_id
from app.events.signing import SecretBox
from app.kit.db import Database, utcnow
from app.kit.errors import NotFound, TooManyRequests, Unauthorized, invalid
from app.kit.settings import Settings
from app.outcomes import inbound, inbound_pool, meaning, notices, repository, simulated
from app.outcomes.models import OutcomeRecord, OutcomeSource
from app.outcomes.providers import PROVIDERS
from app.outcomes.providers.base import BadSignature
from app.outcomes.providers.sendgrid import parse_sendgrid
from app.outcomes.replies import Classification, DecidedBy, ReplyCategory
from app.outcomes.schemas import (
    Calibration,
    IngestResult,
    OutcomeEvent,
    OutcomeType,
    ReplyOut,
    RunOutcomes,
    SentEmailOutcomes,
    SuppressionOut,
    SuppressionsAdded,
    SuppressionsIn,
)
from app.outcomes.sources import OutcomeSourceCreate, OutcomeSourceCreated, OutcomeSourceOut
from app.outcomes.verification import domain_of
from app.stats.intervals import Z_95, wilson

MIN_CALIBRATION_EMAILS = 5  # below this many sent emails, a rank correlation says nothing


INGEST_ATTEMPTS = 3  # a run deleted under a batch fails its insert once; the retry finds its refs gone


async def ingest(db: Database, box: SecretBox, tenant: str, events: list[OutcomeEvent], *, source_id: str | None = None,
                 texts: dict[str, str] | None = None, nonce: tuple[str, str] | None = None,
                 plus_addressed: frozenset[str] = frozenset(), accept_domain: bool = False,
                 classifications: dict[str, Classification] | None = None, announce: bool = True) -> IngestResult:
    """Stores each event of a known ref of `tenant` once; another tenant's ref is as unknown as a made-up one.

    A reply is verified (`app.outcomes.verification`): `plus_addressed` names the event ids of replies sent to their
    email's plus-address, `accept_domain` is REPLY_ACCEPT_RECIPIENT_DOMAIN. `nonce` (a signing key's hash, a one-time
    token) is recorded in the same transaction as the events: a request refused or failed for any reason leaves it
    unused, so the provider's retry is accepted. A run deleted while its events are stored (a foreign-key violation)
    makes them unattributed: the batch is taken in again. A run waiting for outcomes learns of them from its worker,
    which looks (`app.engine.outcome_watch`).

    Each reply, and each unsubscribe, complaint or bounce, stores its category: the caller's (`category`, else its
    `sentiment`), the provider's event type, or `classifications` (an inbound reply's, by its event id). Those that
    suppress their recipient do so in the same transaction, and each new reply is announced to its run or batch
    (unless not to `announce`: the demo's simulated provider, whose readers are no one a team could answer).
    """
    for attempt in range(INGEST_ATTEMPTS):
        try:
            async with db.transaction() as session:
                if nonce is not None and not await repository.first_use(session, *nonce):
                    raise Unauthorized("this request's one-time token was used before (a replayed request)")
                result = await _store(session, box, tenant, events, source_id, texts, plus_addressed, accept_domain,
                                      classifications or {}, announce)
            break
        except IntegrityError:
            if attempt == INGEST_ATTEMPTS - 1:
                raise
    return result


async def _store(session: AsyncSession, box: SecretBox, tenant: str, events: list[OutcomeEvent], source_id: str | None,
                 texts: dict[str, str] | None, plus_addressed: frozenset[str], accept_domain: bool,
                 classifications: dict[str, Classification], announce: bool) -> IngestResult:
    known = await repository.origins(session, {event.ref for event in events if event.ref})
    rows, seen, unattributed, repeated = [], set(), 0, 0
    for event in events:
        origin = known.get(event.ref) if event.ref else None
        if origin is None or origin.tenant != tenant:
            unattributed += 1
            continue
        if event.id in seen:  # twice in one batch: once
            repeated += 1
            continue
        seen.add(event.id)
        domain = domain_of(event.recipient)
        meant = classifications.get(event.id) or meaning.classified(event, from_provider=source_id is not None)
        if meant is None and event.type in meaning.REPLY_TYPES:
            meant = meaning.UNCLASSIFIED
        rows.append({
            "tenant": tenant, "event_id": event.id, "source_id": source_id, "run_id": origin.run_id,
            "iteration": origin.iteration, "ref": event.ref, "type": event.type, "occurred_at": event.occurred_at,
            "recipient": box.pseudonym(event.recipient), "recipient_domain": domain and box.pseudonym(domain),
            "machine": event.machine, "sentiment": event.sentiment, "text": (texts or {}).get(event.id), "verified": True,
            **_meant(meant),
        })
    replies = [row for row in rows if row["type"] in repository.REPLIES]
    reported = [row for row in rows if row["type"] not in repository.REPLIES]
    if replies:
        sends = await repository.sends(session, tenant, {row["ref"]: row["run_id"] for row in replies})
        for row in reported:  # sends this very batch reports
            if row["ref"] in sends:
                sends[row["ref"]].add(row["recipient"], row["recipient_domain"])
        for row in replies:
            counted_as = sends[row["ref"]].counted_as(row["recipient"], row["recipient_domain"], accept_domain=accept_domain,
                                                      plus_addressed=row["event_id"] in plus_addressed)
            row["verified"] = counted_as is not None
            row["recipient"] = counted_as or row["recipient"]
    stored = await repository.insert_new(session, rows) if rows else set()
    await repository.verify_replies(session, tenant, {(row["run_id"], row["ref"], row["recipient"]) for row in reported})
    await _follow_up(session, tenant, [row for row in rows if row["event_id"] in stored], announce)
    return IngestResult(accepted=len(stored), duplicates=repeated + len(rows) - len(stored), unattributed=unattributed)


def _meant(meant: Classification | None) -> dict:
    if meant is None:
        return {}
    return {"category": meant.category, "confidence": meant.confidence, "decided_by": meant.decided_by,
            "reason": meant.reason, "returns_on": meant.returns_on}


async def _follow_up(session: AsyncSession, tenant: str, stored: list[dict], announce: bool) -> None:
    """What newly stored outcomes set off: the suppressions they ask for, and (to `announce`) each reply's
    `reply.received`."""
    holds: dict[str, meaning.Hold] = {}
    for row in stored:
        if row.get("category") is not None and (hold := meaning.suppression(row["type"], _classification(row))):
            holds[row["recipient"]] = _stronger(holds.get(row["recipient"]), hold)
    await repository.suppress(session, tenant, holds)
    replies = [row for row in stored if row["type"] in meaning.REPLY_TYPES] if announce else []
    drafts = await repository.draft_origins(session, {row["ref"] for row in replies})
    await notices.announce(session, [notices.ReplyNotice(
        tenant=tenant, ref=row["ref"], run_id=row["run_id"], iteration=row["iteration"],
        draft_batch_id=drafts.get(row["ref"], (None, None))[0], prospect_id=drafts.get(row["ref"], (None, None))[1],
        category=row["category"], confidence=row["confidence"]) for row in replies])


def _classification(row: dict) -> Classification:
    return Classification(row["category"], row["confidence"], row["decided_by"], row["reason"], row["returns_on"])


def _stronger(held: meaning.Hold | None, hold: meaning.Hold) -> meaning.Hold:
    """Of two suppressions of one recipient in one request: for good over for a while, else the later end."""
    if held is None or held.until is not None and (hold.until is None or hold.until > held.until):
        return hold
    return held


# ---------------------------------------------------------------- sources


async def create_source(db: Database, box: SecretBox, tenant: str, body: OutcomeSourceCreate) -> OutcomeSourceCreated:
    """The provider's verification material is sealed; credentials the provider makes (Postmark's basic-auth
    password) are shown once."""
    source_id = new_id("src")
    provider = PROVIDERS[body.provider]
    try:
        material, basic_auth = provider.credentials(source_id, body.material())
    except ValueError as exc:
        raise invalid(provider.credential, str(exc)) from None
    source = OutcomeSource(id=source_id, tenant=tenant, provider=body.provider, name=body.name, secret=box.seal(material))
    async with db.transaction() as session:
        session.add(source)
    return OutcomeSourceCreated(**OutcomeSourceOut.of(source).model_dump(), basic_auth=basic_auth)


async def list_sources(session: AsyncSession, tenant: str) -> list[OutcomeSourceOut]:
    rows = await session.scalars(select(OutcomeSource).where(OutcomeSource.tenant == tenant).order_by(OutcomeSource.id))
    return [OutcomeSourceOut.of(source) for source in rows]


async def source_of(session: AsyncSession, source_id: str, tenant: str | None = None) -> OutcomeSource:
    source = await session.get(OutcomeSource, source_id)
    if source is None or (tenant is not None and source.tenant != tenant):
        raise NotFound(f"outcome source {source_id!r} not found")
    return source


async def delete_source(db: Database, source_id: str, tenant: str) -> None:
    async with db.transaction() as session:
        await session.delete(await source_of(session, source_id, tenant))


# ---------------------------------------------------------------- providers' webhooks and replies


async def _verified_source(db: Database, box: SecretBox, source_id: str) -> tuple[OutcomeSource, str]:
    async with db.read() as session:
        source = await source_of(session, source_id)
    return source, box.open(source.secret) if source.secret else ""


async def receive_webhook(db: Database, box: SecretBox, source_id: str, headers: Mapping[str, str],
                          body: bytes) -> IngestResult:
    """Verifies the request by the source's provider's scheme (401, storing nothing, when it fails), then ingests."""
    source, material = await _verified_source(db, box, source_id)
    provider = PROVIDERS[source.provider]
    try:
        token = provider.verify(headers, body, material=material, source_id=source.id, now=time.time())
        events = provider.parse(headers, body)
    except BadSignature as exc:
        raise Unauthorized(str(exc)) from None
    except ValueError as exc:
        raise invalid(None, str(exc)) from None
    nonce = (box.pseudonym(material), token) if token is not None else None
    return await ingest(db, box, source.tenant, events, source_id=source.id, nonce=nonce)


async def receive_reply(db: Database, box: SecretBox, settings: Settings, source_id: str, headers: Mapping[str, str],
                        content_type: str, body: bytes) -> IngestResult:
    """A reply becomes a `replied` event (an auto-reply an `auto_replied` one) of the email it answers.

    The source's provider checks its credentials first (Postmark's basic auth; where a provider signs no inbound
    post, the unguessable inbound URL is the credential): a message is parsed (in a parser process, within
    INBOUND_PARSE_TIMEOUT_S) only for a known source.
    """
    source, material = await _verified_source(db, box, source_id)
    try:
        PROVIDERS[source.provider].verify_inbound(headers, material=material, source_id=source.id)
    except BadSignature as exc:
        raise Unauthorized(str(exc)) from None
    limits = inbound.Limits(max_text_chars=settings.inbound_max_text_chars, max_mime_parts=settings.inbound_max_mime_parts,
                            max_mime_depth=settings.inbound_max_mime_depth)
    try:
        reply = await inbound_pool.parser(settings.inbound_parse_workers).read(
            content_type, body, domain=settings.message_id_domain, limits=limits, timeout_s=settings.inbound_parse_timeout_s)
    except inbound.Refused as exc:
        raise invalid(None, str(exc)) from None
    except inbound_pool.Busy as exc:
        raise TooManyRequests(str(exc), inbound_pool.RETRY_AFTER_S) from None
    if reply is None:
        raise invalid(None, "not a reply: the body is no RFC 822 message, or is a delivery or read report")
    event = OutcomeEvent(ref=reply.ref, type=OutcomeType.AUTO_REPLIED if reply.auto else OutcomeType.REPLIED,
                         occurred_at=reply.occurred_at, id=reply.event_id,
                         recipient=inbound.storable_key(reply.sender.strip()) if reply.sender and reply.sender.strip()
                         else "unknown")
    texts = {event.id: reply.text} if settings.store_reply_text and not reply.auto else None
    return await ingest(db, box, source.tenant, [event], source_id=source.id, texts=texts,
                        plus_addressed=frozenset({event.id} if reply.plus_addressed else ()),
                        accept_domain=settings.reply_accept_recipient_domain,
                        classifications={event.id: _classification_of(reply)})


def _classification_of(reply: inbound.InboundReply) -> Classification:
    """The reply's category, read by the parser from its own text (quoted history cut) and its headers."""
    return reply.classification


async def send_simulated(db: Database, box: SecretBox, settings: Settings, tenant: str, world: simulated.SimulatedWorld,
                         scenario_id: str, email: Email, ref: str, message_id: str, seed: int, sent_at: datetime,
                         report: simulated.Window, sends: int = simulated.SENDS) -> IngestResult:
    """The demo's provider reports what its readers did with the email within `report` of the world's time, through
    the providers' own parsers (SendGrid's Event Webhook, RFC 822 replies) and `ingest`."""
    events, replies = simulated.campaign(world, scenario_id, email, ref, message_id, seed, sent_at, sends, report)
    parsed, texts, meant = parse_sendgrid(events), {}, {}
    for raw in replies:
        reply = inbound.parse_reply(raw, domain=settings.message_id_domain)
        parsed.append(OutcomeEvent(ref=reply.ref, type=OutcomeType.AUTO_REPLIED if reply.auto else OutcomeType.REPLIED,
                                   occurred_at=reply.occurred_at, id=reply.event_id, recipient=reply.sender))
        meant[reply.event_id] = _classification_of(reply)
        if settings.store_reply_text and not reply.auto:
            texts[reply.event_id] = reply.text
    return await ingest(db, box, tenant, parsed, texts=texts or None, classifications=meant, announce=False)


# ---------------------------------------------------------------- reading back


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Rank correlation (ties share their mean rank); None below MIN_CALIBRATION_EMAILS pairs or with no spread."""
    if len(xs) < MIN_CALIBRATION_EMAILS:
        return None
    value = pl.DataFrame({"x": xs, "y": ys}).select(pl.corr("x", "y", method="spearman")).item()
    return None if value is None or math.isnan(value) else float(value)


async def run_outcomes(session: AsyncSession, run_id: str, scale: meaning.InterestScale) -> RunOutcomes:
    """Per sent email (one with any outcome): its counts of distinct recipients, rates over delivered, the judge's score,
    its replies by category (`positive_replies`: verified ones the interest scale puts above 0). Unverified replies
    are shown apart and count in no rate."""
    counts: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    iterations: dict[str, int] = {}
    for ref, iteration, kind, machine, sentiment, verified, recipients in await repository.counts_by_ref(session, run_id):
        iterations[ref] = iteration
        tally = counts[ref]
        if kind == OutcomeType.REPLIED and not verified:
            tally["unverified_replies"] += recipients
        elif kind == OutcomeType.OPENED:
            tally["machine_opens" if machine else "opens"] += recipients
        elif kind == OutcomeType.CLICKED and not machine:
            tally["clicks"] += recipients
        elif kind == OutcomeType.REPLIED:
            tally["replies"] += recipients
        elif kind in (OutcomeType.DELIVERED, OutcomeType.BOUNCED):
            tally["delivered" if kind == OutcomeType.DELIVERED else "bounces"] += recipients
    sends = await repository.recipients_by_ref(session, run_id)
    scores = await repository.judge_scores(session, set(iterations))
    by_category = await repository.categories_by_ref(session, iterations)
    positive = await repository.positive_recipients(session, iterations, scale.positive)
    emails = []
    for ref in sorted(iterations, key=lambda r: (iterations[r], r)):
        tally, delivered = counts[ref], counts[ref]["delivered"]
        emails.append(SentEmailOutcomes(
            iteration=iterations[ref], ref=ref, sends=sends.get(ref, 0), delivered=delivered, opens=tally["opens"],
            machine_opens=tally["machine_opens"], clicks=tally["clicks"], replies=tally["replies"],
            positive_replies=positive.get(ref, 0), replies_by_category=by_category.get(ref, {}), bounces=tally["bounces"],
            unverified_replies=tally["unverified_replies"],
            open_rate=min(1.0, tally["opens"] / delivered) if delivered else None,
            reply_rate=min(1.0, tally["replies"] / delivered) if delivered else None,
            reply_rate_interval=wilson(min(tally["replies"], delivered) / delivered, delivered, Z_95) if delivered else None,
            judge_score=scores.get(ref),
        ))
    paired = [(e.judge_score, e.reply_rate) for e in emails if e.judge_score is not None and e.reply_rate is not None]
    return RunOutcomes(data=emails, calibration=Calibration(
        spearman=spearman([s for s, _ in paired], [r for _, r in paired]), n=len(paired)))


# ---------------------------------------------------------------- replies and suppression

REPLY_PREFIX = "rpl_"


def reply_view(row: OutcomeRecord, prospect_id: str | None, batch_id: str | None, *, show_text: bool) -> ReplyOut:
    return ReplyOut(id=f"{REPLY_PREFIX}{row.id}", ref=row.ref, prospect_id=prospect_id,
                    iteration=None if batch_id is not None else row.iteration,
                    category=row.category or ReplyCategory.unknown, confidence=row.confidence or 0.0,
                    decided_by=row.decided_by or DecidedBy.rules, reason=row.reason, received_at=row.occurred_at,
                    returns_on=row.returns_on, text=row.text if show_text else None)


def _row_id(reply_id: str) -> int | None:
    digits = reply_id.removeprefix(REPLY_PREFIX)
    wellformed = reply_id.startswith(REPLY_PREFIX) and digits.isascii() and digits.isdigit() and len(digits) < 19
    return int(digits) if wellformed else None


async def replies_page(session: AsyncSession, settings: Settings, tenant: str, *, run_id: str | None = None,
                       batch_id: str | None = None, after: str | None, limit: int) -> tuple[list[ReplyOut], bool]:
    """A run's or a draft batch's replies, oldest first; the caller has checked that the run or batch is the tenant's."""
    start = 0 if after is None else _row_id(after)
    if start is None:
        raise invalid("after", f"{after!r} is no reply id (`rpl_…`)")
    query = repository.reply_page_query(tenant, run_id=run_id, batch_id=batch_id, after=start)
    rows = (await session.execute(query.limit(limit + 1))).all()
    return [reply_view(*row, show_text=settings.store_reply_text) for row in rows[:limit]], len(rows) > limit


async def relabel(db: Database, box: SecretBox, settings: Settings, tenant: str, reply_id: str,
                  category: ReplyCategory) -> ReplyOut:
    """The reply's category as the caller reads it (`decided_by: caller`), which learning reads from now on; a relabel
    to `unsubscribe` suppresses its recipient. Another tenant's reply is as unknown as a made-up one."""
    row_id = _row_id(reply_id)
    async with db.transaction() as session:
        found = await repository.reply_of(session, row_id, tenant) if row_id is not None else None
        if found is None:
            raise NotFound(f"reply {reply_id!r} not found")
        row, prospect_id, batch_id = found
        row.category, row.confidence, row.decided_by = category, 1.0, DecidedBy.caller
        row.reason = "relabelled by the caller"
        if category != ReplyCategory.out_of_office:
            row.returns_on = None
        if hold := meaning.suppression(row.type, _classification(
                {"category": category, "confidence": 1.0, "decided_by": DecidedBy.caller, "reason": row.reason,
                 "returns_on": row.returns_on})):
            await repository.suppress(session, tenant, {row.recipient: hold})
        return reply_view(row, prospect_id, batch_id, show_text=settings.store_reply_text)


async def add_suppressions(db: Database, box: SecretBox, tenant: str, body: SuppressionsIn) -> SuppressionsAdded:
    holds = {box.pseudonym(email): meaning.Hold(body.reason, None) for email in body.emails}
    async with db.transaction() as session:
        await repository.suppress(session, tenant, holds)
    return SuppressionsAdded(suppressed=len(holds))


async def suppression_of(session: AsyncSession, box: SecretBox, tenant: str, email: str) -> SuppressionOut:
    key = box.pseudonym(email)
    found = (await repository.suppressed(session, tenant, [key], utcnow().date())).get(key)
    if found is None:
        raise NotFound("that address is not suppressed")
    return SuppressionOut(reason=found.reason, since=found.since, until=found.until)


async def lift_suppression(db: Database, box: SecretBox, tenant: str, email: str) -> None:
    async with db.transaction() as session:
        if not await repository.unsuppress(session, tenant, box.pseudonym(email)):
            raise NotFound("that address is not suppressed")


async def suppressions_of(session: AsyncSession, box: SecretBox, tenant: str, emails: list[str | None]
                          ) -> list[SuppressionOut | None]:
    """For each address (None: a prospect without one), its suppression today, or None."""
    keys = [box.pseudonym(email) if email else None for email in emails]
    found = await repository.suppressed(session, tenant, {key for key in keys if key}, utcnow().date())
    return [SuppressionOut(reason=found[key].reason, since=found[key].since, until=found[key].until)
            if key in found else None for key in keys]
