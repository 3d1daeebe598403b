"""A run's iteration kept as a policy of its own (`app.learned.models.Policy`), and a new run that starts from one.

Keeping copies what the run had learned by iteration k (node scores, lessons, rewards, its configuration) and, where
the backend stores checkpoints with us, the checkpoint's parameters under the policy's own model name: the policy
outlives the run. A backend that keeps checkpoints at its provider is named by model and step; how long the provider
keeps it is the provider's affair.
"""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.specs import SPECS, base_model, copy_stored_checkpoint, model_name
from app.events.service import new_id
from app.kit.db import serialize_on
from app.kit.errors import Conflict, NotFound, invalid
from app.kit.settings import Settings
from app.knowledge_graph.graph import KnowledgeGraph, ScenarioScores
from app.learned import store
from app.learned.likeness import most_like
from app.learned.models import Policy
from app.learned.store import PolicyRef, policy_id
from app.loop.schemas import TrainingOutcome
from app.runs import repository as runs
from app.runs.models import Iteration, NodeScore, NodeScoreChange, Run


def _refused(field: str | None, message: str) -> Exception:
    """A 422 naming the body's field, or a 404 for a path's id."""
    return invalid(field, message) if field else NotFound(message)


async def keep(session: AsyncSession, text: str, tenant: str, settings: Settings, *, field: str | None = None,
               name: str | None = None) -> tuple[Policy, bool]:
    """The tenant's policy of that id or alias, kept from the run's records on first use (True) in the caller's
    transaction. Another tenant's, an unknown one, an unknown run or an unrecorded iteration is not found."""
    text = text.strip()
    if store.is_own_id(text):
        policy = await store.owned(session, text, tenant)
        if policy is None:
            raise _refused(field, f"policy {text[:120]!r} not found")
        return policy, False
    ref = PolicyRef.parse(text)
    if ref is None:
        raise _refused(field, f"{text[:120]!r} is no policy id: write 'pol_…', '<run_id>@<iteration>' or '<run_id>'")
    missing = _refused(field, f"policy {text!r} not found: no such policy or run of yours, or no such iteration recorded")
    run = await session.get(Run, ref.run_id)
    iteration = ref.iteration
    if iteration is None:
        iteration = await runs.latest_iteration(session, run.id) if run is not None and run.tenant == tenant else None
        if iteration is None:
            raise missing
    source = policy_id(ref.run_id, iteration)
    await serialize_on(session, f"policy:{source}")  # two first uses of one alias keep it once
    kept = await store.by_source(session, source)
    if kept is not None:
        if kept.tenant != tenant:
            raise missing
        return kept, False
    row = None if run is None or run.tenant != tenant else await session.get(Iteration, (run.id, iteration))
    if row is None:
        raise missing
    policy = await _snapshot(session, run, row, settings, name)
    session.add(policy)
    await session.flush()
    return policy, True


async def _snapshot(session: AsyncSession, run: Run, row: Iteration, settings: Settings, name: str | None) -> Policy:
    config = run.effective_config
    spec = SPECS[config.backend]
    step = (TrainingOutcome.model_validate(row.training).step if row.training else 0) if spec.trainable else None
    scores = await runs.scores_after(session, run.id, row.iteration)
    policy = Policy(
        id=new_id("pol"), tenant=run.tenant, graph_id=run.graph_id, name=name, source=policy_id(run.id, row.iteration),
        run_id=run.id, iteration=row.iteration, backend=config.backend, base_model=base_model(config.backend, settings),
        training_step=step, config=run.config, node_scores={s: dict(nodes) for s, nodes in scores.items()},
        lessons=row.context, reward=row.rewards, trained_at=row.finished_at)
    if step is not None:
        policy.checkpoint = model_name(settings, policy.id if spec.stores_checkpoints else run.id)
        if spec.stores_checkpoints and not await copy_stored_checkpoint(
                session, model_name(settings, run.id), step, policy.checkpoint, step):
            raise Conflict(f"the checkpoint of step {step} of run {run.id!r} is no longer stored: "
                           f"{policy.source!r} cannot be kept")
    return policy


# ---------------------------------------------------------------- warm start (`init_from`)


@dataclass(frozen=True)
class WarmStart:
    """What the run starts from, per scenario of the new run."""

    scores: ScenarioScores
    lessons: dict | None
    checkpoint: tuple[str, int] | None  # the model name and step to copy as the new run's step 0


def fork(policy: Policy, graph: KnowledgeGraph, backend: str, scenario_ids: list[str]) -> WarmStart:
    """The policy's learned state per scenario of the new run, if the run can continue it; otherwise a 422 saying why.
    A scenario the policy was not trained on starts from the training scenario it is most like."""
    if policy.graph_id != graph.id:
        raise invalid("init_from", f"policy {policy.source!r} was learned on graph {policy.graph_id!r}, not on {graph.id!r}")
    if policy.backend != backend:
        raise invalid("init_from", f"policy {policy.source!r} was learned with backend {policy.backend!r}: a run on "
                                   f"{backend!r} cannot continue its checkpoint")
    if not SPECS[backend].continuable:
        raise invalid("init_from", f"backend {backend!r} cannot continue a checkpoint here: ART forks a checkpoint only "
                                   "through experimental members this service does not call; start from scratch")
    trained_on = policy.config["scenario_ids"]
    lessons = policy.lessons or {}
    trained = [graph.scenarios[s] for s in trained_on if s in graph.scenarios]
    scores, contexts = ScenarioScores(), {}
    for scenario_id in scenario_ids:
        source = scenario_id if scenario_id in trained_on else most_like(
            graph.scenarios[scenario_id].prospect, trained).id if trained else None
        if source is None:
            continue
        if source in policy.node_scores:
            scores[scenario_id] = dict(policy.node_scores[source])
        if source in lessons:
            contexts[scenario_id] = lessons[source]
    checkpoint = (policy.checkpoint, policy.training_step) if policy.training_step is not None else None
    return WarmStart(scores=scores, lessons=contexts or None, checkpoint=checkpoint)


async def start_from(session: AsyncSession, text: str, tenant: str, graph: KnowledgeGraph, backend: str,
                     scenario_ids: list[str], run_id: str, settings: Settings) -> dict | None:
    """In the new run's creating transaction (the run flushed): the policy kept (if it was not), the run's scores as of
    iteration 0 and its checkpoint's step 0 copied from it; returns the lessons it continues with."""
    policy, _ = await keep(session, text, tenant, settings, field="init_from")
    warm = fork(policy, graph, backend, scenario_ids)
    for scenario_id, moved in warm.scores.items():
        for node_id, score in moved.items():
            session.add(NodeScore(run_id=run_id, scenario_id=scenario_id, node_id=node_id, score=score))
            session.add(NodeScoreChange(run_id=run_id, iteration=0, scenario_id=scenario_id, node_id=node_id, score=score))
    if warm.checkpoint is not None:
        source, step = warm.checkpoint
        if not await copy_stored_checkpoint(session, source, step, model_name(settings, run_id), 0):
            raise invalid("init_from", f"the checkpoint of step {step} of {source!r} is no longer stored")
    return warm.lessons
