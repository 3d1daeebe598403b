"""Starting runs: the effective configuration, idempotent creation, and the workflow's enqueue; and the changes to a
graph that the runs on it hold back.

`POST /learn-loop` and `codreamer run` both start runs here.
"""

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.specs import SPECS, BackendUnavailable, check_available
from app.core import Services
from app.events.service import new_id
from app.events.signing import new_secret
from app.events.ssrf import UnsafeWebhookURL, redacted, resolve
from app.kit.auth import OPEN_TENANT
from app.kit.db import serialize_on
from app.kit.errors import Conflict, TooManyRequests, invalid
from app.kit.idempotency import check_same_request, create_once, request_hash
from app.knowledge_graph import repository as graphs
from app.knowledge_graph import service as graph_service
from app.knowledge_graph.schemas import GraphDocument
from app.loop.schemas import FeedbackMode
from app.outcomes.simulated import has_world
from app.runs import policies, queue, repository
from app.runs.models import IdempotencyKey, Run
from app.runs.schemas import EffectiveConfig, LearnLoopRequest, RunCreated
from app.runs.status import RunStatus


def links(run_id: str) -> dict:
    base = f"/runs/{run_id}"
    return {"self": base, "iterations": f"{base}/iterations", "events": f"{base}/events", "node_scores": f"{base}/node-scores"}


async def effective_config(svc: Services, body: LearnLoopRequest, tenant: str) -> EffectiveConfig:
    """Every field with its effective value, or a 422 naming the field (or the cap) that is wrong."""
    async with svc.db.read() as session:
        visible = await graphs.visible(session, body.graph_id, tenant)
    graph = await svc.graphs.get(body.graph_id) if visible else None
    if graph is None:
        raise invalid("graph_id", f"unknown graph {body.graph_id!r}; see GET /graphs")
    scenario_ids = body.scenario_ids or list(graph.scenarios)
    if not scenario_ids:  # a graph without scenarios, or one read as it was being deleted
        raise invalid("graph_id", f"graph {body.graph_id!r} has no scenarios to train on")
    caps = svc.settings
    if len(scenario_ids) > caps.max_scenarios_per_run:
        raise invalid("scenario_ids", f"{len(scenario_ids)} scenarios is over the cap MAX_SCENARIOS_PER_RUN="
                                      f"{caps.max_scenarios_per_run}; name fewer with scenario_ids")
    rollouts = len(scenario_ids) * body.rollouts_per_group
    if rollouts > caps.max_rollouts_per_iteration:
        raise invalid("rollouts_per_group", f"{len(scenario_ids)} scenarios × {body.rollouts_per_group} rollouts = {rollouts} "
                                            f"is over the cap MAX_ROLLOUTS_PER_ITERATION={caps.max_rollouts_per_iteration}")
    if rollouts * body.max_turns > caps.max_turn_rollouts:
        raise invalid("max_turns", f"{body.max_turns} turns × {rollouts} rollouts = {rollouts * body.max_turns} is over "
                                   f"the cap MAX_TURN_ROLLOUTS={caps.max_turn_rollouts}")
    unknown = [s for s in scenario_ids if s not in graph.scenarios]
    if unknown:
        raise invalid("scenario_ids", f"unknown scenario ids for graph {graph.id!r}: {unknown}")
    if len(set(scenario_ids)) != len(scenario_ids):
        raise invalid("scenario_ids", "scenario ids must be unique")
    target = body.target_scenario_id or scenario_ids[0]
    if target not in graph.scenarios:
        raise invalid("target_scenario_id", f"unknown scenario {target!r} for graph {graph.id!r}")
    backend = body.backend or svc.settings.model_backend
    spec = SPECS[backend]
    try:
        check_available(backend, svc.settings)
    except BackendUnavailable as exc:
        raise invalid("backend", str(exc)) from None
    if body.learning_rate is not None and not spec.trainable:
        raise invalid("learning_rate", f"backend {backend!r} serves a fixed model and does not train; remove learning_rate")
    try:
        train_options = spec.options.model_validate(body.train_options or {}).model_dump()
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", "train_options", *e["loc"]), "msg": f"{e['msg']} (backend {backend!r})"} for e in exc.errors(include_url=False)]
        ) from None
    judge = body.judge or "default"
    if judge not in svc.settings.judge_names():
        raise invalid("judge", f"unknown judge {judge!r}; configured: {', '.join(svc.settings.judge_names())} (see GET /judges)")
    webhook_url = str(body.webhook_url) if body.webhook_url else None
    if webhook_url:
        try:
            await resolve(webhook_url, allow_private=svc.settings.webhook_allow_private)
        except UnsafeWebhookURL as exc:
            raise invalid("webhook_url", str(exc)) from None
    simulated = has_world(graph)
    feedback_source = body.feedback_source or (FeedbackMode.SIMULATED if simulated else FeedbackMode.OUTCOMES)
    if feedback_source in (FeedbackMode.SIMULATED, FeedbackMode.ORACLE) and not simulated:
        raise invalid("feedback_source", f"graph {graph.id!r} has no simulated prospects (only the demo has); "
                                         "use `outcomes` or `none`")
    if body.feedback_wait and body.max_steps_off_policy:
        raise invalid("max_steps_off_policy", "a run paced by feedback_wait scores each iteration on the outcomes of the "
                                              "one before, so it runs in strict order: leave max_steps_off_policy out or 0")
    off_policy = body.max_steps_off_policy if body.max_steps_off_policy is not None else 0 if body.feedback_wait else 1
    return EffectiveConfig.model_validate(body.model_dump() | {
        "feedback_source": feedback_source, "max_steps_off_policy": off_policy,
        "scenario_ids": scenario_ids, "target_scenario_id": target, "backend": backend, "webhook_url": webhook_url,
        "learning_rate": body.learning_rate or spec.default_learning_rate, "train_options": train_options,
        "in_context": (not spec.trainable) if body.in_context is None else body.in_context, "judge": judge,
    })


async def _replay(svc: Services, tenant: str, key: str, body_hash: str) -> RunCreated | None:
    """The run an earlier request with this key created; its webhook secret was shown then, and only then."""
    async with svc.db.read() as session:
        record = await session.get(IdempotencyKey, (tenant, key))
        if record is None:
            return None
        check_same_request(key, record.request_hash, body_hash)
        run = await session.get(Run, record.run_id)
    note = "shown once, in the response that created the run" if run.webhook_url else None
    return RunCreated(run_id=run.id, status=run.status, webhook_secret=None, webhook_secret_note=note, links=links(run.id))


async def _still_fits(session, config: EffectiveConfig) -> None:
    """The graph the run was validated against, locked until the run is stored: a replacement or deletion
    waits for it (and is then refused, the graph being in use), or went first and is seen here. Read in
    the transaction's own session: a second connection could wait on a pool its peers hold."""
    if await graphs.lock(session, config.graph_id, shared=True) is None:
        raise invalid("graph_id", f"unknown graph {config.graph_id!r}; see GET /graphs")
    gone = sorted({*config.scenario_ids, config.target_scenario_id} - await graphs.scenario_ids(session, config.graph_id))
    if gone:
        raise Conflict(f"graph {config.graph_id!r} was replaced while the run was being created and no longer has "
                       f"scenario(s) {gone}; start the run again")


async def create_run(
    svc: Services, body: LearnLoopRequest, idempotency_key: str | None = None, tenant: str = OPEN_TENANT,
) -> tuple[RunCreated, bool]:
    """The new run, queued; or, for a repeated Idempotency-Key with the same body, the first one (True)."""
    body_hash = request_hash(body)
    created, replayed = await create_once(idempotency_key, lambda: _replay(svc, tenant, idempotency_key, body_hash),
                                          lambda: _create_run(svc, body, idempotency_key, tenant, body_hash), "run")
    if not replayed:
        await queue.enqueue(created.run_id)
    return created, replayed


async def _create_run(svc: Services, body: LearnLoopRequest, idempotency_key: str | None, tenant: str, body_hash: str
                      ) -> RunCreated:
    config = await effective_config(svc, body, tenant)
    secret = new_secret() if config.webhook_url else None
    run = Run(
        id=new_id("run"), tenant=tenant, status=RunStatus.QUEUED, graph_id=config.graph_id, iterations_total=config.iterations,
        config=config.model_dump(mode="json") | {"webhook_url": redacted(config.webhook_url) if config.webhook_url else None},
        webhook_url=svc.secrets.seal(config.webhook_url) if config.webhook_url else None, webhook_secret=svc.secrets.seal(secret) if secret else None,
    )
    graph = await svc.graphs.get(config.graph_id) if config.init_from else None
    async with svc.db.transaction() as session:
        await serialize_on(session, f"runs-of-tenant:{tenant}")  # the cap's count and the insert, one at a time
        active = await session.scalar(select(func.count()).select_from(Run).where(
            Run.tenant == tenant, Run.status.in_((RunStatus.QUEUED, RunStatus.RUNNING))))
        if active >= svc.settings.max_active_runs_per_tenant:
            raise TooManyRequests(f"{active} runs are queued or running, the cap MAX_ACTIVE_RUNS_PER_TENANT="
                                  f"{svc.settings.max_active_runs_per_tenant}; retry when one ends", retry_after_s=30)
        await _still_fits(session, config)
        session.add(run)
        if config.init_from:
            await session.flush()
            run.initial_context = await policies.start_from(session, config.init_from, tenant, graph, config.backend,
                                                            config.scenario_ids, run.id, svc.settings)
        if idempotency_key:
            await session.flush()
            session.add(IdempotencyKey(tenant=tenant, key=idempotency_key, request_hash=body_hash, run_id=run.id))
    note = "shown once: keep it, later responses never include it" if secret else None
    return RunCreated(run_id=run.id, status=run.status, webhook_secret=secret, webhook_secret_note=note, links=links(run.id))


async def replace_graph(session: AsyncSession, document: GraphDocument, tenant: str) -> None:
    """Swaps the tenant's graph for the document; refused (409) while a run on it is queued or running,
    since a run keeps the version it started with by refusal, not by a copy."""
    await graph_service.lock_changeable(session, document.id, tenant)
    if active := await repository.runs_on_graph(session, document.id, active_only=True):
        raise Conflict(f"graph {document.id!r} is in use by {active} queued or running run(s); "
                       "wait for them to finish or cancel them")
    await graphs.replace(session, document)


async def delete_graph(session: AsyncSession, graph_id: str, tenant: str) -> None:
    """Removes the tenant's graph; refused (409) while any run, finished or not, refers to it."""
    await graph_service.lock_changeable(session, graph_id, tenant)
    if runs := await repository.runs_on_graph(session, graph_id, active_only=False):
        raise Conflict(f"graph {graph_id!r} is in use by {runs} run(s); delete them first (DELETE /runs/{{id}})")
    await graphs.remove(session, graph_id)
