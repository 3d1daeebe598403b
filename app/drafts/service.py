"""Draft batches as the API takes them in (JSON or a CSV file) and gives them back (JSON pages, CSV, outcomes)."""

import csv
import io
import random
from datetime import timedelta

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import Services
from app.drafts import queue, repository
from app.drafts.events import DraftBatchCancelledData, DraftBatchFailedData, DraftBatchSucceededData
from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import (
    CSV_COLUMNS,
    ENDED,
    EXPORT_COLUMNS,
    MAX_PROSPECTS,
    BatchCreated,
    BatchLinks,
    BatchOut,
    BatchStatus,
    DraftOut,
    DraftRequest,
    ProspectIn,
    ProspectOutcomes,
)
from app.events import service as events
from app.events.schemas import Receiver, Subject, SubjectKind
from app.events.service import new_id
from app.events.signing import new_secret
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.kit import durable
from app.kit.db import serialize_on, utcnow
from app.kit.errors import Conflict, NotFound, TooManyRequests, invalid
from app.kit.idempotency import check_same_request, create_once, request_hash
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs
from app.learned import store
from app.learned.models import Policy, TrafficArm
from app.learned.store import policy_id
from app.outcomes.schemas import OutcomeType, Sentiment
from app.runs import policies as kept
from app.stats.bandit import auto_shares, champion_share

MAX_CSV_BYTES = 2 * 1024 * 1024  # 1,000 prospects with ten long pains each fit well within
RETRY_AFTER_S = 30  # over the cap of active batches: a batch of a thousand takes minutes
ORPHAN_AFTER = timedelta(minutes=1)  # a queued batch with no workflow this long after its creation lost its enqueue


def links(batch_id: str) -> BatchLinks:
    return BatchLinks(self=f"/draft-batches/{batch_id}", drafts=f"/draft-batches/{batch_id}/drafts")


# ---------------------------------------------------------------- CSV in


def prospects_from_csv(data: bytes) -> list[dict]:
    """Rows of a sales tool's export: a header row naming at least name, company, role, industry and pains (`;`
    between pains); email, goal and id are optional. A bad row is a 422 naming its line (the header is line 1) and
    field."""
    if len(data) > MAX_CSV_BYTES:
        raise invalid("file", f"the CSV file is over {MAX_CSV_BYTES // 1024 // 1024} MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise invalid("file", "the CSV file is not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in ("name", "company", "role", "industry", "pains") if name not in header]
    if missing:
        raise invalid("file", f"line 1: the header lacks the column(s) {', '.join(missing)} "
                              f"(expected {','.join(CSV_COLUMNS)})")
    unknown = [name for name in header if name not in (*CSV_COLUMNS, "id")]
    if unknown:
        raise invalid("file", f"line 1: unknown column(s) {', '.join(unknown)} (expected {','.join(CSV_COLUMNS)}, and id)")
    reader.fieldnames = header
    rows, errors = [], []
    try:
        for number, row in enumerate(reader, start=2):
            if len(rows) >= MAX_PROSPECTS:
                raise invalid("file", f"the CSV file has over {MAX_PROSPECTS} prospects; split it into batches")
            if None in row:
                errors.append(_csv_error(number, None, "more fields than the header names"))
                continue
            values = {k: (v or "").strip() for k, v in row.items()}
            if not any(values.values()):
                continue  # a blank line
            prospect = {k: v for k, v in values.items() if k != "pains" and (v or k in ("name", "company", "role", "industry"))}
            prospect["pains"] = [p.strip() for p in values.get("pains", "").split(";") if p.strip()]
            try:
                rows.append(ProspectIn.model_validate(prospect).model_dump(exclude_none=True))
            except ValidationError as exc:
                errors += [_csv_error(number, str(e["loc"][0]) if e["loc"] else None, e["msg"]) for e in exc.errors()]
    except csv.Error as exc:
        raise invalid("file", f"line {reader.line_num}: {exc}") from None
    if errors:
        raise RequestValidationError(errors[:50])
    if not rows:
        raise invalid("file", "the CSV file has no prospect rows")
    return rows


def _csv_error(line: int, field: str | None, message: str) -> dict:
    return {"loc": ("body", "file", f"line {line}", *([field] if field else [])), "type": "value_error",
            "msg": f"line {line}{f', {field}' if field else ''}: {message}"}


# ---------------------------------------------------------------- creating a batch


async def _arms(session: AsyncSession, body: DraftRequest, tenant: str, settings: Settings) -> list[tuple[Policy, float]]:
    """The policies that draft (kept, if they were not) and their shares: the one named, alone; else the deployment's
    champion and challengers."""
    if body.policy is not None:
        policy, _ = await kept.keep(session, body.policy, tenant, settings, field="policy")
        if policy.graph_id != body.graph_id:
            raise invalid("policy", f"policy {policy.source!r} was learned on graph {policy.graph_id!r}, "
                                    f"not on graph {body.graph_id!r}")
        return [(policy, 1.0)]
    deployed = await store.current_deployment(session, body.graph_id, tenant)
    if deployed is None:
        raise invalid("policy", f"graph {body.graph_id!r} has no deployed policy: name one, or deploy one first "
                                f"(PUT /graphs/{body.graph_id}/deployment)")
    challengers = deployed.challengers or []
    ids = [deployed.policy_id] + [c.policy_id for c in challengers]
    if deployed.traffic == "auto":
        mature_before = utcnow() - timedelta(seconds=settings.reply_window_s)
        seen = await store.sends_by_policy(session, tenant, body.graph_id, mature_before)
        shares = auto_shares([seen.get(arm, (0, 0)) for arm in ids], floor=deployed.floor, min_sends=deployed.min_sends,
                             seed=body.seed)
    else:
        shares = [champion_share([c.share for c in challengers])] + [c.share for c in challengers]
    return [(await store.owned(session, arm, tenant), share) for arm, share in zip(ids, shares)]


def choose_arm(shares: list[float], seed: int, prospect_id: str, position: int) -> int:
    """A draw by share, reproducible from the batch's seed and the prospect: the logged decision and its propensity
    (the arm's share) are what off-policy evaluation reads."""
    u = random.Random(f"{seed}:{position}:{prospect_id}").random() * sum(shares)
    for arm, share in enumerate(shares):
        if u < share:
            return arm
        u -= share
    return max(arm for arm, share in enumerate(shares) if share > 0)


async def create_batch(svc: Services, body: DraftRequest, tenant: str, idempotency_key: str | None = None
                       ) -> tuple[BatchCreated, bool]:
    """The batch, queued, with a row per prospect; or, for a repeated Idempotency-Key with the same body, the first
    (True). Nothing is stored on any refusal."""
    digest = request_hash(body)
    created, replayed = await create_once(idempotency_key, lambda: _replay(svc, tenant, idempotency_key, digest),
                                          lambda: _create_batch(svc, body, tenant, idempotency_key, digest), "batch")
    if not replayed:
        await queue.enqueue(created.batch_id, tenant)
    return created, replayed


async def _create_batch(svc: Services, body: DraftRequest, tenant: str, idempotency_key: str | None, digest: str
                        ) -> BatchCreated:
    webhook_url = str(body.webhook_url) if body.webhook_url else None
    async with svc.db.read() as session:
        if not await graphs.visible(session, body.graph_id, tenant):
            raise invalid("graph_id", f"unknown graph {body.graph_id!r}; see GET /graphs")
    graph = await svc.graphs.get(body.graph_id)
    if webhook_url:
        try:
            await resolve(webhook_url, allow_private=svc.settings.webhook_allow_private)
        except UnsafeWebhookURL as exc:
            raise invalid("webhook_url", str(exc)) from None
    secret = new_secret() if webhook_url else None
    async with svc.db.transaction() as session:  # the policies kept and the batch stored, or neither
        await _within_cap(session, tenant, svc.settings)
        arms = await _arms(session, body, tenant, svc.settings)
        policy = arms[0][0]
        default_goal = body.goal or graph.scenarios[policy.config["scenario_ids"][0]].goal
        batch = DraftBatch(
            id=new_id("drb"), tenant=tenant, graph_id=body.graph_id, policy_id=policy.id, run_id=policy.run_id,
            iteration=policy.iteration, count=len(body.prospects), seed=body.seed, idempotency_key=idempotency_key,
            request_hash=digest,
            arms=[TrafficArm(policy_id=p.id, run_id=p.run_id, iteration=p.iteration, share=share) for p, share in arms],
            webhook_url=svc.secrets.seal(webhook_url) if webhook_url else None,
            webhook_secret=svc.secrets.seal(secret) if secret else None,
        )
        shares = [share for _, share in arms]
        drafts = []
        for position, prospect in enumerate(body.prospects):
            prospect_id = prospect.id or f"p{position + 1}"
            arm = choose_arm(shares, body.seed, prospect_id, position)
            author = arms[arm][0]
            drafts.append(Draft(batch_id=batch.id, position=position, policy_id=author.id, run_id=author.run_id,
                                iteration=author.iteration, variant=arm, propensity=shares[arm],
                                prospect=prospect.model_dump(mode="json") | {
                                    "id": prospect_id, "goal": prospect.goal or default_goal}))
        session.add(batch)
        await session.flush()
        session.add_all(drafts)
    return BatchCreated(batch_id=batch.id, status=batch.status, count=batch.count, webhook_secret=secret,
                        links=links(batch.id))


async def _within_cap(session: AsyncSession, tenant: str, settings: Settings) -> None:
    """429 while the tenant has MAX_ACTIVE_DRAFT_BATCHES_PER_TENANT batches queued or running; the count and the
    insert that follows take turns per tenant, so concurrent requests cannot all pass it."""
    await serialize_on(session, f"draft-batches-of-tenant:{tenant}")
    active = await repository.active_batches(session, tenant)
    if active >= settings.max_active_draft_batches_per_tenant:
        raise TooManyRequests(f"{active} draft batches are queued or running, the cap "
                              f"MAX_ACTIVE_DRAFT_BATCHES_PER_TENANT={settings.max_active_draft_batches_per_tenant}; "
                              "retry when one ends (or cancel one)", retry_after_s=RETRY_AFTER_S)


async def end(session: AsyncSession, batch: DraftBatch, error: str | None) -> None:
    """The batch succeeded, or failed saying why (resumable), with its outcome event and its webhook's delivery, in
    the caller's transaction, which holds the batch's row."""
    batch.status = BatchStatus.FAILED if error else BatchStatus.SUCCEEDED
    batch.error = {"message": error, "step": "draft"} if error else None
    batch.finished_at = utcnow()
    payload = DraftBatchFailedData if error else DraftBatchSucceededData
    await events.emit(session, subject(batch), payload(
        batch_id=batch.id, seq=await events.last_seq(session, subject(batch)) + 1, count=batch.count,
        completed=batch.completed, policy=policy_id(batch.run_id, batch.iteration), error=batch.error,
    ), receiver(batch))


async def end_orphans(svc: Services) -> list[str]:
    """Batches left queued or running with nothing to end them: one whose workflow ended without ending it (its last
    step failed through a database outage of minutes), or belongs to another version (an upgrade mid-batch), fails,
    resumable; one whose enqueue a crash lost is enqueued. Returns the batches it failed."""
    async with svc.db.read() as session:
        active = await repository.active(session)
        attempts = {batch.id: await events.last_seq(session, subject(batch)) + 1 for batch in active}
    ids = {queue.workflow_id(batch.id, attempts[batch.id]): batch for batch in active}
    states = await durable.states(list(ids))
    ended = []
    for workflow_id, batch in ids.items():
        state = states.get(workflow_id)
        if state is None and batch.status == BatchStatus.QUEUED and utcnow() - batch.created_at > ORPHAN_AFTER:
            await queue.enqueue(batch.id, batch.tenant, attempts[batch.id])  # idempotent
        elif state is not None and state.abandoned:
            if state.stale:
                await durable.cancel(workflow_id)  # it would hold its queue slot
            why = ("the service was upgraded while the batch was in flight" if state.stale else
                   f"the batch's workflow ended ({state.status}) without ending it; see the server log")
            async with svc.db.transaction() as session:
                locked = await session.get(DraftBatch, batch.id, with_for_update=True)
                if locked is not None and locked.status not in ENDED:
                    await end(session, locked, f"{why}. Resume it to draft what is missing.")
                    ended.append(batch.id)
    return ended


async def cancel_batch(svc: Services, batch_id: str, tenant: str) -> BatchOut:
    """A queued or running batch stops drafting (its chunks draft nothing more) and ends `cancelled`, with its
    `draft_batch.cancelled` event; the drafts stored stand. A finished batch is a 409."""
    async with svc.db.transaction() as session:
        batch = await _locked(session, batch_id, tenant)
        if batch.status in ENDED:
            raise Conflict(f"draft batch {batch_id!r} is {batch.status}; only a queued or running batch can be "
                           "cancelled")
        ended = await events.last_seq(session, subject(batch))
        batch.status, batch.finished_at = BatchStatus.CANCELLED, utcnow()
        await events.emit(session, subject(batch), DraftBatchCancelledData(
            batch_id=batch.id, seq=ended + 1, count=batch.count, completed=batch.completed,
            policy=policy_id(batch.run_id, batch.iteration), error=None), receiver(batch))
        view = batch_view(batch)
    await queue.cancel(batch_id, attempt=ended + 1)
    return view


async def resume_batch(svc: Services, batch_id: str, tenant: str) -> BatchOut:
    """A failed batch is queued again, as a new workflow: its chunks draft only the prospects not drafted yet."""
    async with svc.db.transaction() as session:
        batch = await _locked(session, batch_id, tenant)
        if batch.status != BatchStatus.FAILED:
            raise Conflict(f"draft batch {batch_id!r} is {batch.status}; only a failed batch can be resumed")
        await _within_cap(session, tenant, svc.settings)
        attempt = await events.last_seq(session, subject(batch)) + 1  # each attempt before it ended with an event
        batch.status, batch.error, batch.finished_at = BatchStatus.QUEUED, None, None
        view = batch_view(batch)
    await queue.enqueue(batch_id, tenant, attempt)
    return view


async def _locked(session: AsyncSession, batch_id: str, tenant: str) -> DraftBatch:
    batch = await session.get(DraftBatch, batch_id, with_for_update=True)
    if batch is None or batch.tenant != tenant:
        raise NotFound(f"draft batch {batch_id!r} not found")
    return batch


def receiver(batch: DraftBatch) -> Receiver | None:
    """Where the batch's events are POSTed (through the outbox relay), if anywhere."""
    return Receiver(batch.webhook_url, batch.webhook_secret) if batch.webhook_url else None


async def _replay(svc: Services, tenant: str, key: str, digest: str) -> BatchCreated | None:
    async with svc.db.read() as session:
        batch = await repository.by_idempotency_key(session, tenant, key)
    if batch is None:
        return None
    check_same_request(key, batch.request_hash, digest)
    return BatchCreated(batch_id=batch.id, status=batch.status, count=batch.count, links=links(batch.id))


# ---------------------------------------------------------------- reading back


async def batch_of(session: AsyncSession, batch_id: str, tenant: str) -> DraftBatch:
    batch = await session.get(DraftBatch, batch_id)
    if batch is None or batch.tenant != tenant:
        raise NotFound(f"draft batch {batch_id!r} not found")
    return batch


def subject(batch: DraftBatch) -> Subject:
    """Whom the batch's events belong to."""
    return Subject(SubjectKind.DRAFT_BATCH, batch.id, batch.tenant)


def batch_view(batch: DraftBatch) -> BatchOut:
    return BatchOut(batch_id=batch.id, graph_id=batch.graph_id, policy=policy_id(batch.run_id, batch.iteration),
                    policy_id=batch.policy_id,
                    status=batch.status, count=batch.count, completed=batch.completed, created_at=batch.created_at,
                    finished_at=batch.finished_at, error=batch.error)


def draft_view(batch: DraftBatch, draft: Draft) -> DraftOut:
    return DraftOut(position=draft.position, prospect=draft.prospect, email=draft.email,
                    policy=policy_id(draft.run_id, draft.iteration), policy_id=draft.policy_id,
                    judge_score=draft.judge_score,
                    variant=draft.variant, propensity=draft.propensity, like=draft.like)


async def drafts_page(session: AsyncSession, batch: DraftBatch, *, after: int, limit: int) -> tuple[list[DraftOut], bool]:
    """In prospect order; `after` is a position (the drafts' order in the request, from 0)."""
    rows = await repository.drafts(session, batch.id, after=after, limit=limit + 1)
    return [draft_view(batch, row) for row in rows[:limit]], len(rows) > limit


async def drafts_csv(session: AsyncSession, batch: DraftBatch) -> str:
    """Every draft, as a sequencer imports them: one row per prospect, the ref and Message-ID as custom columns."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    for draft in await repository.drafts(session, batch.id):
        prospect, email = draft.prospect, draft.email or {}
        writer.writerow([prospect["id"], prospect["name"], prospect.get("email") or "", prospect["company"], prospect["role"],
                         prospect["industry"], email.get("subject", ""), email.get("body", ""), email.get("ref", ""),
                         email.get("message_id", ""), policy_id(draft.run_id, draft.iteration),
                         "" if draft.judge_score is None else f"{draft.judge_score:.4f}"])
    return out.getvalue()


async def batch_outcomes(session: AsyncSession, batch: DraftBatch) -> list[ProspectOutcomes]:
    """Per drafted prospect: distinct recipients of each kind of outcome of its email (human opens and clicks only)."""
    refs, rows = await repository.refs_and_outcomes(session, batch.id)
    counts: dict[str, dict[str, int]] = {ref: {} for ref in refs}
    for ref, kind, machine, sentiment, n in rows:
        tally = counts[ref]
        key = {OutcomeType.DELIVERED: "delivered", OutcomeType.BOUNCED: "bounces", OutcomeType.REPLIED: "replies",
               OutcomeType.OPENED: None if machine else "opens", OutcomeType.CLICKED: None if machine else "clicks"}.get(kind)
        if key:
            tally[key] = tally.get(key, 0) + n
        if kind == OutcomeType.REPLIED and sentiment == Sentiment.POSITIVE:
            tally["positive_replies"] = tally.get("positive_replies", 0) + n
    return [ProspectOutcomes(prospect_id=prospect, ref=ref, **{k: counts[ref].get(k, 0) for k in (
        "delivered", "opens", "clicks", "replies", "positive_replies", "bounces")}) for ref, prospect in refs.items()]
