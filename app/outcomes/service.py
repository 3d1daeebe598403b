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
from app.kit.db import Database
from app.kit.errors import NotFound, TooManyRequests, Unauthorized, invalid
from app.kit.settings import Settings
from app.outcomes import inbound, inbound_pool, repository, simulated
from app.outcomes.models import OutcomeSource
from app.outcomes.providers import PROVIDERS
from app.outcomes.providers.base import BadSignature
from app.outcomes.providers.sendgrid import parse_sendgrid
from app.outcomes.schemas import (
    Calibration,
    IngestResult,
    OutcomeEvent,
    OutcomeType,
    RunOutcomes,
    SentEmailOutcomes,
    Sentiment,
)
from app.outcomes.sources import OutcomeSourceCreate, OutcomeSourceCreated, OutcomeSourceOut
from app.stats.intervals import Z_95, wilson

MIN_CALIBRATION_EMAILS = 5  # below this many sent emails, a rank correlation says nothing


INGEST_ATTEMPTS = 3  # a run deleted under a batch fails its insert once; the retry finds its refs gone


async def ingest(db: Database, box: SecretBox, tenant: str, events: list[OutcomeEvent], *, source_id: str | None = None,
                 texts: dict[str, str] | None = None, nonce: tuple[str, str] | None = None) -> IngestResult:
    """Stores each event of a known ref of `tenant` once; another tenant's ref is as unknown as a made-up one.

    `nonce` (a signing key's hash, a one-time token) is recorded in the same transaction as the events: a request
    refused or failed for any reason leaves it unused, so the provider's retry is accepted. A run deleted while its
    events are stored (a foreign-key violation) makes them unattributed: the batch is taken in again. A run waiting for
    outcomes learns of them from its worker, which looks (`app.engine.outcome_watch`).
    """
    for attempt in range(INGEST_ATTEMPTS):
        try:
            async with db.transaction() as session:
                if nonce is not None and not await repository.first_use(session, *nonce):
                    raise Unauthorized("this request's one-time token was used before (a replayed request)")
                result = await _store(session, box, tenant, events, source_id, texts)
            break
        except IntegrityError:
            if attempt == INGEST_ATTEMPTS - 1:
                raise
    return result


async def _store(session: AsyncSession, box: SecretBox, tenant: str, events: list[OutcomeEvent], source_id: str | None,
                 texts: dict[str, str] | None) -> IngestResult:
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
        rows.append({
            "tenant": tenant, "event_id": event.id, "source_id": source_id, "run_id": origin.run_id,
            "iteration": origin.iteration, "ref": event.ref, "type": event.type, "occurred_at": event.occurred_at,
            "recipient": box.pseudonym(event.recipient), "machine": event.machine, "sentiment": event.sentiment,
            "text": (texts or {}).get(event.id),
        })
    stored = await repository.insert_new(session, rows) if rows else set()
    return IngestResult(accepted=len(stored), duplicates=repeated + len(rows) - len(stored), unattributed=unattributed)


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
    return await ingest(db, box, source.tenant, [event], source_id=source.id, texts=texts)


async def send_simulated(db: Database, box: SecretBox, settings: Settings, tenant: str, world: simulated.SimulatedWorld,
                         scenario_id: str, email: Email, ref: str, message_id: str, seed: int, sent_at: datetime,
                         report: simulated.Window, sends: int = simulated.SENDS) -> IngestResult:
    """The demo's provider reports what its readers did with the email within `report` of the world's time, through
    the providers' own parsers (SendGrid's Event Webhook, RFC 822 replies) and `ingest`."""
    events, replies = simulated.campaign(world, scenario_id, email, ref, message_id, seed, sent_at, sends, report)
    parsed = parse_sendgrid(events)
    texts = {}
    for raw in replies:
        reply = inbound.parse_reply(raw, domain=settings.message_id_domain)
        parsed.append(OutcomeEvent(ref=reply.ref, type=OutcomeType.AUTO_REPLIED if reply.auto else OutcomeType.REPLIED,
                                   occurred_at=reply.occurred_at, id=reply.event_id, recipient=reply.sender))
        if settings.store_reply_text and not reply.auto:
            texts[reply.event_id] = reply.text
    return await ingest(db, box, tenant, parsed, texts=texts or None)


# ---------------------------------------------------------------- reading back


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Rank correlation (ties share their mean rank); None below MIN_CALIBRATION_EMAILS pairs or with no spread."""
    if len(xs) < MIN_CALIBRATION_EMAILS:
        return None
    value = pl.DataFrame({"x": xs, "y": ys}).select(pl.corr("x", "y", method="spearman")).item()
    return None if value is None or math.isnan(value) else float(value)


async def run_outcomes(session: AsyncSession, run_id: str) -> RunOutcomes:
    """Per sent email (one with any outcome): its counts of distinct recipients, rates over delivered, the judge's score."""
    counts: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    iterations: dict[str, int] = {}
    for ref, iteration, kind, machine, sentiment, recipients in await repository.counts_by_ref(session, run_id):
        iterations[ref] = iteration
        tally = counts[ref]
        if kind == OutcomeType.OPENED:
            tally["machine_opens" if machine else "opens"] += recipients
        elif kind == OutcomeType.CLICKED and not machine:
            tally["clicks"] += recipients
        elif kind == OutcomeType.REPLIED:
            tally["replies"] += recipients
            tally["positive_replies"] += recipients if sentiment == Sentiment.POSITIVE else 0
        elif kind in (OutcomeType.DELIVERED, OutcomeType.BOUNCED):
            tally["delivered" if kind == OutcomeType.DELIVERED else "bounces"] += recipients
    sends = await repository.recipients_by_ref(session, run_id)
    scores = await repository.judge_scores(session, set(iterations))
    emails = []
    for ref in sorted(iterations, key=lambda r: (iterations[r], r)):
        tally, delivered = counts[ref], counts[ref]["delivered"]
        emails.append(SentEmailOutcomes(
            iteration=iterations[ref], ref=ref, sends=sends.get(ref, 0), delivered=delivered, opens=tally["opens"],
            machine_opens=tally["machine_opens"], clicks=tally["clicks"], replies=tally["replies"],
            positive_replies=tally["positive_replies"], bounces=tally["bounces"],
            open_rate=min(1.0, tally["opens"] / delivered) if delivered else None,
            reply_rate=min(1.0, tally["replies"] / delivered) if delivered else None,
            reply_rate_interval=wilson(min(tally["replies"], delivered) / delivered, delivered, Z_95) if delivered else None,
            judge_score=scores.get(ref),
        ))
    paired = [(e.judge_score, e.reply_rate) for e in emails if e.judge_score is not None and e.reply_rate is not None]
    return RunOutcomes(data=emails, calibration=Calibration(
        spearman=spearman([s for s, _ in paired], [r for _, r in paired]), n=len(paired)))
