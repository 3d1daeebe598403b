"""An evaluation's durable workflow: one step writes each policy's emails to the held-out prospects, judges them and
predicts their positive-reply rate, then estimates off-policy, from the drafts already sent, each policy's
positive-reply rate (a reply the interest scale puts above 0) and its unsubscribe-and-complaint rate (the promotion
gate's guardrail). Only
workers import this module (it imports the loop)."""

import asyncio
import logging
from datetime import timedelta

from dbos import DBOS

from app import tasks
from app.drafts import repository as drafts
from app.drafts.writing import agent_prospect, write_for, writer
from app.engine.executor import current
from app.evaluations import service
from app.evaluations.schemas import ACTIVE, EvaluationStatus
from app.kit import durable
from app.kit.db import describe, utcnow
from app.knowledge_graph import repository as graphs
from app.knowledge_graph.offers import offer_for
from app.learned.likeness import most_like
from app.learned.models import Evaluation
from app.loop.features import content_hash, email_features, segment
from app.loop.outcome_model import OutcomeModel
from app.loop.reward import rollout_seed
from app.outcomes import repository as outcomes
from app.outcomes.meaning import InterestScale
from app.policies import service as policy_service
from app.policies.events import EvaluationSucceededData
from app.policies.schemas import EvaluationResult, PolicyEvaluation
from app.stats import estimators

log = logging.getLogger("codreamer")


def direct_method(author_training: list, held_out_likes: list[str], held_out_predictions: list[float],
                  prospects: list[dict]) -> list[float] | None:
    """DR's direct method for each logged send: the outcome model's mean predicted reply rate of the policy's emails to
    the held-out prospects that are like the same training scenario as the send's prospect (the policy writes for a
    prospect with that scenario's learned state, `app.drafts.writing.write_for`), or of all its held-out emails where
    none is. A function of the prospect alone, never of which arm wrote the send: DR stays unbiased. None without any
    held-out email."""
    if not held_out_predictions:
        return None
    overall = sum(held_out_predictions) / len(held_out_predictions)
    by_like: dict[str, list[float]] = {}
    for like, predicted in zip(held_out_likes, held_out_predictions, strict=True):
        by_like.setdefault(like, []).append(predicted)
    strata = {like: sum(values) / len(values) for like, values in by_like.items()}
    likes: dict[tuple, str] = {}
    out = []
    for prospect in prospects:
        key = (prospect.get("role"), prospect.get("industry"), tuple(prospect.get("pains") or ()))
        if key not in likes:
            likes[key] = most_like(agent_prospect(prospect), author_training).id
        out.append(strata.get(likes[key], overall))
    return out


@DBOS.step(name="evaluate", **durable.THROUGH_DATABASE_TROUBLE)
async def evaluate_step(evaluation_id: str) -> str:
    """Re-run whole after a passing database error: nothing is recorded before its last transaction."""
    executor = current()
    services, settings = executor.services, executor.settings
    async with services.db.transaction() as session:
        evaluation = await session.get(Evaluation, evaluation_id, with_for_update=True)
        if evaluation is None:
            return "gone"
        if evaluation.status not in ACTIVE:  # cancelled (or replayed after its end)
            return evaluation.status
        evaluation.status = EvaluationStatus.RUNNING
    graph = await services.graphs.get(evaluation.graph_id)
    mature_before = utcnow() - timedelta(seconds=settings.reply_window_s)
    scale = InterestScale.of(settings.reply_interest)
    async with services.db.read() as session:
        sent = await outcomes.sent_emails(session, evaluation.tenant, mature_before=mature_before, scale=scale,
                                          graph_id=graph.id)
        logged = await drafts.logged_sends(session, evaluation.tenant, graph.id, mature_before, scale)
        # per batch, each policy's share of it: a policy outside a batch had no chance there
        shares = {batch: {arm.policy_id: arm.share for arm in arms}
                  for batch, arms in (await drafts.arms_by_batch(session, evaluation.tenant, graph.id)).items()}
    model = await asyncio.to_thread(OutcomeModel.fit, sent, settings.outcome_prior_sends, scale.bottom / scale.top)
    writers = [await writer(executor, graph, policy_id) for policy_id in evaluation.policy_ids]
    trained = {s for w in writers for s in w.config.scenario_ids}
    if evaluation.prospects:
        held_out = [p | {"id": p.get("id") or f"p{i + 1}", "goal": p.get("goal") or offer_for(graph, p.get("role"))}
                    for i, p in enumerate(evaluation.prospects)]
    else:
        held_out = [s.prospect.model_dump() | {"id": s.id, "goal": s.goal} for s in graph.scenarios.values()
                    if s.id not in trained]
    reason = None if held_out else "every scenario of the graph trained one of the policies: give held-out prospects"
    reports = []
    for author in writers:
        judged, predicted, likes = [], [], []
        for position, prospect in enumerate(held_out):
            drafted = await write_for(author, graph, prospect, rollout_seed(0, 0, prospect["id"], position))
            like, written = drafted.like, drafted.written
            if written is None or written.email is None:
                continue
            email = written.email.email
            if written.score is not None:
                judged.append(written.score)
            if model.fitted:
                likes.append(like)
                predicted.append(model.estimate(email_features(email, prospect["name"], prospect["company"],
                                                               segment(prospect.get("role") or "",
                                                                       prospect.get("industry") or "")),
                                                content_hash(email)).p_positive)
        predicted_reply = estimators.mean_interval(predicted)
        mine = author.policy.id
        rows = [row for row in logged if shares.get(row.batch, {}).get(mine, 0) > 0]
        arms, propensities = [int(row.policy_id == mine) for row in rows], [row.propensity for row in rows]
        off = estimators.off_policy(
            arms=arms, propensities=propensities, rewards=[float(row.positive) for row in rows], arm=1,
            predicted=direct_method(author.training, likes, predicted, [row.prospect for row in rows]))
        unsubscribes = estimators.off_policy(arms=arms, propensities=propensities,
                                             rewards=[float(row.unsubscribed) for row in rows], arm=1, predicted=None)
        if logged and not rows:
            off = unsubscribes = estimators.OffPolicy(
                n=0, reason="it had no share in any batch whose sends have a known outcome")
        reports.append(PolicyEvaluation(
            policy=author.policy.source, held_out=len(judged), judge=estimators.mean_interval(judged),
            predicted_reply=predicted_reply, off_policy=off, unsubscribes=unsubscribes,
            verified_recipients=len({row.replier for row in rows if row.policy_id == mine and row.replied})))
    result = EvaluationResult(policies=reports, held_out_reason=reason, predicted_reply_reason=None if model.fitted else
                              "no email sent on this graph has a known outcome yet: the outcome model has nothing to "
                              "predict from")
    async with services.db.transaction() as session:
        evaluation = await session.get(Evaluation, evaluation_id, with_for_update=True)
        # not after a cancel, nor twice (a step replayed after its commit)
        if evaluation is not None and evaluation.status == EvaluationStatus.RUNNING:
            evaluation.result, evaluation.status = result.model_dump(mode="json"), EvaluationStatus.SUCCEEDED
            evaluation.finished_at = utcnow()
            await graphs.lock(session, evaluation.graph_id)  # promotions (and the graph's events) take turns
            await policy_service.announce(session, evaluation.graph_id, evaluation.tenant, EvaluationSucceededData,
                                          evaluation=evaluation.id, policies=evaluation.policies)
            if promoted := await policy_service.promote_if_ahead(session, evaluation, settings.promotion_min_recipients,
                                                                 settings.unsubscribe_guardrail):
                log.info("evaluation %s put %s ahead on graph %s: promoted", evaluation_id, promoted, evaluation.graph_id)
    return EvaluationStatus.SUCCEEDED.value


@DBOS.step(name="evaluation_failed", **durable.THROUGH_DATABASE_TROUBLE)
async def fail_step(evaluation_id: str, message: str) -> None:
    async with current().services.db.transaction() as session:
        evaluation = await session.get(Evaluation, evaluation_id, with_for_update=True)
        if evaluation is not None and evaluation.status in ACTIVE:  # not after a cancel, nor twice (a replayed step)
            await service.fail(session, evaluation, message)


@DBOS.workflow(name=tasks.EVALUATION.name)
async def evaluation(evaluation_id: str) -> str:
    try:
        return await evaluate_step(evaluation_id)
    except Exception as exc:  # noqa: BLE001 - the evaluation fails, saying why; the log has the whole cause
        log.error("evaluation %s failed", evaluation_id, exc_info=exc)
        await fail_step(evaluation_id, describe(exc))
        return "failed"
