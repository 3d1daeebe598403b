"""Draft batches as the API takes them in (JSON or a CSV file) and gives them back (JSON pages, CSV, outcomes)."""

import random
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.names import addressee
from app.core import Services
from app.drafts import csv_files, queue, repository
from app.drafts.csv_files import ExportRow, Layout
from app.drafts.events import (
    BatchReplyReceivedData,
    DraftBatchCancelledData,
    DraftBatchFailedData,
    DraftBatchSucceededData,
)
from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import (
    ENDED,
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
from app.kit.pages import newest_first
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.offers import offer_for, signer
from app.knowledge_graph.schemas import Scenario
from app.learned import store
from app.learned.models import Policy, TrafficArm
from app.learned.store import policy_id
from app.outcomes import notices
from app.outcomes import repository as outcomes
from app.outcomes.meaning import InterestScale
from app.outcomes.schemas import OutcomeType
from app.runs import policies as kept
from app.stats.bandit import auto_shares, champion_share

RETRY_AFTER_S = 30  # over the cap of active batches: a batch of a thousand takes minutes
ORPHAN_AFTER = timedelta(minutes=1)  # a queued batch with no workflow this long after its creation lost its enqueue


def links(batch_id: str) -> BatchLinks:
    return BatchLinks(self=f"/draft-batches/{batch_id}", drafts=f"/draft-batches/{batch_id}/drafts")


def prospects_from_csv(data: bytes) -> list[ProspectIn]:
    """A sales tool's export as the batch's prospects (see `app.drafts.csv_files`); a bad row is a 422 naming its
    line and column."""
    return csv_files.prospects_from_csv(data, ProspectIn, MAX_PROSPECTS)


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
        seen = await store.sends_by_policy(session, tenant, body.graph_id, mature_before,
                                           InterestScale.of(settings.reply_interest))
        shares = auto_shares([seen.get(arm, (0, 0)) for arm in ids], floor=deployed.floor, min_sends=deployed.min_sends,
                             seed=body.seed)
    else:
        shares = [champion_share([c.share for c in challengers])] + [c.share for c in challengers]
    return [(await store.owned(session, arm, tenant), share) for arm, share in zip(ids, shares)]


def _trained_on(graph: KnowledgeGraph, policy: Policy) -> list[Scenario]:
    """The policy's training scenarios the graph still has (a prospect borrows the learned state of the one it is most
    like, and a goal from the first); 422 naming them when a graph edit removed every one."""
    ids = policy.config["scenario_ids"]
    found = [graph.scenarios[s] for s in ids if s in graph.scenarios]
    if not found:
        raise invalid("policy", f"policy {policy.source!r} was trained on scenario(s) {', '.join(map(repr, ids))}, which "
                                f"graph {graph.id!r} no longer has: deploy or name a policy trained on the graph as it is")
    return found


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
        for author, _ in arms:  # 422 naming the scenarios a graph edit removed from under a policy
            _trained_on(graph, author)
        sender = signer(body.sender, graph, svc.settings)
        batch = DraftBatch(
            id=new_id("drb"), tenant=tenant, graph_id=body.graph_id, policy_id=policy.id, run_id=policy.run_id,
            iteration=policy.iteration, count=len(body.prospects), seed=body.seed, idempotency_key=idempotency_key,
            request_hash=digest, sender=sender.model_dump(exclude_none=True) if sender else None,
            skip_low_fit=body.skip_low_fit,
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
            sanitized = prospect._sanitized + (body._goal_sanitized if prospect.goal is None else [])
            drafts.append(Draft(batch_id=batch.id, position=position, policy_id=author.id, run_id=author.run_id,
                                iteration=author.iteration, variant=arm, propensity=shares[arm], sanitized=sanitized or None,
                                prospect=prospect.model_dump(mode="json") | {
                                    "id": prospect_id,
                                    "goal": prospect.goal or body.goal or offer_for(graph, prospect.role)}))
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


@notices.listen
async def announce_reply(session: AsyncSession, notice: notices.ReplyNotice) -> None:
    """`reply.received` for a reply to one of the batch's drafts, to its events and its webhook."""
    if notice.draft_batch_id is None:
        return
    batch = await session.get(DraftBatch, notice.draft_batch_id, with_for_update=True)
    if batch is None:
        return
    about = subject(batch)
    await events.emit(session, about, BatchReplyReceivedData(
        batch_id=batch.id, seq=await events.last_seq(session, about) + 1, ref=notice.ref, category=notice.category,
        confidence=notice.confidence, prospect_id=notice.prospect_id),
        Receiver(batch.webhook_url, batch.webhook_secret) if batch.webhook_url else None)


def batch_view(batch: DraftBatch) -> BatchOut:
    return BatchOut(batch_id=batch.id, graph_id=batch.graph_id, policy=policy_id(batch.run_id, batch.iteration),
                    policy_id=batch.policy_id,
                    status=batch.status, count=batch.count, completed=batch.completed, created_at=batch.created_at,
                    finished_at=batch.finished_at, error=batch.error, sender=batch.sender,
                    skip_low_fit=batch.skip_low_fit)


async def batches_page(session: AsyncSession, tenant: str, graph_id: str | None, *, after: str | None, limit: int
                       ) -> tuple[list[BatchOut], bool]:
    """Newest first."""
    rows, more = await newest_first(session, DraftBatch, tenant=tenant, graph_id=graph_id, after=after, limit=limit)
    return [batch_view(row) for row in rows], more


def draft_view(batch: DraftBatch, draft: Draft) -> DraftOut:
    return DraftOut(position=draft.position, prospect=draft.prospect, email=draft.email,
                    policy=policy_id(draft.run_id, draft.iteration), policy_id=draft.policy_id,
                    judge_score=draft.judge_score,
                    variant=draft.variant, propensity=draft.propensity, like=draft.like, fit=draft.fit,
                    fit_reason=draft.fit_reason, sanitized=draft.sanitized or [], suppressed=draft.suppressed)


async def drafts_page(session: AsyncSession, batch: DraftBatch, *, after: int, limit: int) -> tuple[list[DraftOut], bool]:
    """In prospect order; `after` is a position (the drafts' order in the request, from 0)."""
    rows = await repository.drafts(session, batch.id, after=after, limit=limit + 1)
    return [draft_view(batch, row) for row in rows[:limit]], len(rows) > limit


async def drafts_csv(session: AsyncSession, batch: DraftBatch, layout: Layout, columns: list[str] | None) -> str:
    """Every draft, as a sequencer imports them: one row per prospect in the layout's columns, its custom fields
    after them."""
    return csv_files.write_csv([_export_row(draft) for draft in await repository.drafts(session, batch.id)],
                               layout, columns)


def _export_row(draft: Draft) -> ExportRow:
    prospect, email = draft.prospect, draft.email or {}
    company, role = prospect.get("company") or "", prospect.get("role") or ""
    # a sequencer's follow-ups greet by {{first_name}}: read from `name` when none was given, empty when unsure
    first_name = prospect.get("first_name") or addressee(prospect.get("name")).given or ""
    values = {
        "prospect_id": prospect["id"], "email": prospect.get("email") or "", "first_name": first_name,
        "last_name": prospect.get("last_name") or "", "name": prospect.get("name") or "", "company_name": company,
        "company": company, "title": role, "role": role, "industry": prospect.get("industry") or "",
        "subject": email.get("subject", ""), "body": email.get("body", ""), "fit": draft.fit or "",
        "fit_reason": draft.fit_reason or "", "judge_score": "" if draft.judge_score is None else f"{draft.judge_score:.4f}",
        "policy": policy_id(draft.run_id, draft.iteration), "codreamer_ref": email.get("ref", ""),
        "message_id": email.get("message_id", ""), "suppressed": (draft.suppressed or {}).get("reason", ""),
    }
    return ExportRow(values=values, custom=dict(prospect.get("custom") or {}))


async def batch_outcomes(session: AsyncSession, batch: DraftBatch, settings: Settings) -> list[ProspectOutcomes]:
    """Per drafted prospect: distinct recipients of each kind of outcome of its email (human opens and clicks only),
    its replies by category and its latest reply's."""
    refs, rows = await repository.refs_and_outcomes(session, batch.id)
    counts: dict[str, dict[str, int]] = {ref: {} for ref in refs}
    for ref, kind, machine, _sentiment, verified, n in rows:
        tally = counts[ref]
        if kind == OutcomeType.REPLIED and not verified:
            tally["unverified_replies"] = tally.get("unverified_replies", 0) + n
            continue
        key = {OutcomeType.DELIVERED: "delivered", OutcomeType.BOUNCED: "bounces", OutcomeType.REPLIED: "replies",
               OutcomeType.OPENED: None if machine else "opens", OutcomeType.CLICKED: None if machine else "clicks"}.get(kind)
        if key:
            tally[key] = tally.get(key, 0) + n
    by_category = await outcomes.categories_by_ref(session, refs)
    latest = await outcomes.latest_categories(session, refs)
    positive = await outcomes.positive_recipients(session, refs, InterestScale.of(settings.reply_interest).positive)
    return [ProspectOutcomes(prospect_id=prospect, ref=ref, **{k: counts[ref].get(k, 0) for k in (
        "delivered", "opens", "clicks", "replies", "bounces", "unverified_replies")}, positive_replies=positive.get(ref, 0),
        replies_by_category=by_category.get(ref, {}), category=latest.get(ref)) for ref, prospect in refs.items()]
