"""Draft batches as the API takes them in (JSON or a CSV file) and gives them back (JSON pages, CSV, outcomes)."""

import random
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.names import addressee
from app.core import Services
from app.drafts import csv_files, queue, repository
from app.drafts.csv_files import ExportRow, Layout
from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import (
    MAX_PROSPECTS,
    BatchCreated,
    BatchLinks,
    BatchOut,
    DraftOut,
    DraftRequest,
    ProspectIn,
    ProspectOutcomes,
)
from app.events.schemas import Subject, SubjectKind
from app.events.service import new_id
from app.events.signing import new_secret
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.kit.db import utcnow
from app.kit.errors import NotFound, invalid
from app.kit.idempotency import check_same_request, create_once, request_hash
from app.kit.pages import fetch_page
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs
from app.knowledge_graph.offers import offer_for, signer
from app.learned import store
from app.learned.models import Policy, TrafficArm
from app.learned.store import policy_id
from app.outcomes.schemas import OutcomeType, Sentiment
from app.runs import policies as kept
from app.stats.bandit import auto_shares, champion_share


def links(batch_id: str) -> BatchLinks:
    return BatchLinks(self=f"/draft-batches/{batch_id}", drafts=f"/draft-batches/{batch_id}/drafts")


def prospects_from_csv(data: bytes) -> list[dict]:
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
        await queue.enqueue(created.batch_id)
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
        arms = await _arms(session, body, tenant, svc.settings)
        policy = arms[0][0]
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
            drafts.append(Draft(batch_id=batch.id, position=position, policy_id=author.id, run_id=author.run_id,
                                iteration=author.iteration, variant=arm, propensity=shares[arm],
                                prospect=prospect.model_dump(mode="json") | {
                                    "id": prospect_id,
                                    "goal": prospect.goal or body.goal or offer_for(graph, prospect.role)}))
        session.add(batch)
        await session.flush()
        session.add_all(drafts)
    return BatchCreated(batch_id=batch.id, status=batch.status, count=batch.count, webhook_secret=secret,
                        links=links(batch.id))


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
                    finished_at=batch.finished_at, error=batch.error, sender=batch.sender,
                    skip_low_fit=batch.skip_low_fit)


async def batches_page(session: AsyncSession, tenant: str, graph_id: str | None, *, after: str | None, limit: int
                       ) -> tuple[list[BatchOut], bool]:
    """Newest first (ids sort by creation time)."""
    query = select(DraftBatch).where(DraftBatch.tenant == tenant)
    if graph_id is not None:
        query = query.where(DraftBatch.graph_id == graph_id)
    if after is not None:
        query = query.where(DraftBatch.id < after)
    rows, more = await fetch_page(session, query.order_by(DraftBatch.id.desc()), limit)
    return [batch_view(row) for row in rows], more


def draft_view(batch: DraftBatch, draft: Draft) -> DraftOut:
    return DraftOut(position=draft.position, prospect=draft.prospect, email=draft.email,
                    policy=policy_id(draft.run_id, draft.iteration), policy_id=draft.policy_id,
                    judge_score=draft.judge_score,
                    variant=draft.variant, propensity=draft.propensity, like=draft.like, fit=draft.fit,
                    fit_reason=draft.fit_reason)


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
        "message_id": email.get("message_id", ""),
    }
    return ExportRow(values=values, custom=dict(prospect.get("custom") or {}))


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
