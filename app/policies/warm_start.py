"""A run that continues from a policy (`init_from`): it starts with the policy's checkpoint, node scores and lessons.

A scenario of the new run that the policy was not trained on starts from the training scenario it is most like
(`app.policies.likeness`), as a draft's prospect does.
"""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.embedded.repository import copy_checkpoint
from app.backends.specs import SPECS, model_name
from app.kit.errors import invalid
from app.knowledge_graph.graph import KnowledgeGraph, ScenarioScores
from app.policies import repository, service
from app.policies.likeness import most_like
from app.runs.models import NodeScore, NodeScoreChange
from app.kit.settings import Settings


@dataclass(frozen=True)
class WarmStart:
    """What the run starts from, per scenario of the new run."""

    scores: ScenarioScores
    lessons: dict | None
    checkpoint: tuple[str, int] | None  # the model name and step to copy as the new run's step 0


async def prepare(session: AsyncSession, text: str, tenant: str, graph: KnowledgeGraph, backend: str,
                  scenario_ids: list[str], settings: Settings) -> WarmStart:
    """The tenant's policy of the same graph, on a backend that can continue it; otherwise a 422 saying why."""
    policy = await service.resolve(session, text, tenant, field="init_from")
    if policy.graph_id != graph.id:
        raise invalid("init_from", f"policy {policy.id!r} was learned on graph {policy.graph_id!r}, not on {graph.id!r}")
    if policy.backend != backend:
        raise invalid("init_from", f"policy {policy.id!r} was learned with backend {policy.backend!r}: a run on "
                                   f"{backend!r} cannot continue its checkpoint")
    if not SPECS[backend].continuable:
        raise invalid("init_from", f"backend {backend!r} cannot continue a checkpoint here: ART forks a checkpoint only "
                                   "through experimental members this service does not call; start from scratch")
    learned = await repository.node_scores(session, policy)
    lessons = await repository.lessons(session, policy) or {}
    trained = [graph.scenarios[s] for s in policy.config.scenario_ids if s in graph.scenarios]
    scores, contexts = ScenarioScores(), {}
    for scenario_id in scenario_ids:
        source = scenario_id if scenario_id in policy.config.scenario_ids else most_like(
            graph.scenarios[scenario_id].prospect, trained).id if trained else None
        if source is None:
            continue
        if source in learned:
            scores[scenario_id] = learned[source]
        if source in lessons:
            contexts[scenario_id] = lessons[source]
    checkpoint = (model_name(settings, policy.run_id), policy.training_step) if policy.training_step is not None else None
    return WarmStart(scores=scores, lessons=contexts or None, checkpoint=checkpoint)


async def start_from(session: AsyncSession, text: str, tenant: str, graph: KnowledgeGraph, backend: str,
                     scenario_ids: list[str], run_id: str, settings: Settings) -> dict | None:
    """In the new run's creating transaction (the run flushed): its scores as of iteration 0 and its checkpoint's step
    0, copied from the policy; returns the lessons it continues with."""
    warm = await prepare(session, text, tenant, graph, backend, scenario_ids, settings)
    await apply(session, warm, run_id, settings)
    return warm.lessons


async def apply(session: AsyncSession, warm: WarmStart, run_id: str, settings: Settings) -> None:
    for scenario_id, moved in warm.scores.items():
        for node_id, score in moved.items():
            session.add(NodeScore(run_id=run_id, scenario_id=scenario_id, node_id=node_id, score=score))
            session.add(NodeScoreChange(run_id=run_id, iteration=0, scenario_id=scenario_id, node_id=node_id, score=score))
    if warm.checkpoint is not None:
        source, step = warm.checkpoint
        if not await copy_checkpoint(session, source, step, model_name(settings, run_id)):
            raise invalid("init_from", f"the checkpoint of step {step} of {source!r} is no longer stored")
