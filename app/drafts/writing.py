"""A policy writing for prospects it never saw: a draft batch's chunks and an evaluation's held-out prospects both
write through here, so both measure what users send."""

from dataclasses import dataclass

from app.agent import facts
from app.agent.facts import Fit
from app.agent.schemas import ScenarioContext
from app.engine.executor import Executor
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores, ScenarioScores
from app.knowledge_graph.schemas import Prospect, Scenario
from app.learned import store
from app.learned.likeness import most_like
from app.learned.models import Policy as KeptPolicy
from app.loop.email import Written, write_email
from app.loop.generation import Policy
from app.loop.reward import Judge
from app.runs.schemas import EffectiveConfig


class DraftingFailed(Exception):
    pass


@dataclass
class Writer:
    """A kept policy as it drafts: its model pinned to its checkpoint, what it learned per training scenario (as kept),
    its run's configuration, its judge."""

    policy: KeptPolicy
    config: EffectiveConfig
    model: Policy
    scores: ScenarioScores
    lessons: dict
    training: list[Scenario]
    judge: Judge


async def writer(executor: Executor, graph: KnowledgeGraph, policy_id: str) -> Writer:
    async with executor.services.db.read() as session:
        policy = await session.get(KeptPolicy, policy_id)
    if policy is None:
        raise DraftingFailed(f"policy {policy_id} is gone")
    config = EffectiveConfig.model_validate(policy.config)
    model = await executor.policy(store.serving_key(policy), policy.backend)
    if policy.training_step is not None:
        model = model.at(policy.training_step)
    training = [graph.scenarios[s] for s in config.scenario_ids if s in graph.scenarios]
    if not training:
        raise DraftingFailed(f"graph {graph.id!r} no longer has the scenarios policy {policy.source!r} was trained on")
    scores = ScenarioScores({s: NodeScores(nodes) for s, nodes in policy.node_scores.items()})
    return Writer(policy, config, model, scores, policy.lessons or {}, training, executor.judge_named(config.judge))


@dataclass
class Drafted:
    """What a policy wrote for a prospect: the email (None when the batch skips a low fit, or no attempt wrote one),
    whether the graph's facts answer its pains, and the training scenario it is most like (reported, not reused)."""

    like: str
    fit: Fit
    written: Written | None


def agent_prospect(record: dict) -> Prospect:
    """The prospect as the agent reads it: its name as written (and the first name the CRM gave), role, company,
    industry, pains and custom fields."""
    return Prospect.model_construct(
        name=record["name"], role=record.get("role") or "", company=record["company"],
        industry=record.get("industry") or "", pains=list(record.get("pains") or []),
        first_name=record.get("first_name"), custom=dict(record.get("custom") or {}))


async def write_for(author: Writer, graph: KnowledgeGraph, prospect_record: dict, seed: int, *,
                    skip_low_fit: bool = False) -> Drafted:
    """The email `author` writes to a prospect it never saw. The agent starts from the facts that answer this
    prospect's pains (`app.agent.facts`), with no training scenario's node scores, exemplar or goal: what the policy
    learned decides how it explores and writes, not which scenario's facts it reuses. Only the judge's lessons of the
    scenario it is most like come along (advice on writing, not facts)."""
    prospect = agent_prospect(prospect_record)
    viewed = prospect.model_dump()
    fit = facts.fit(graph, viewed)
    like = most_like(prospect, author.training)
    if skip_low_fit and not fit.high:
        return Drafted(like.id, fit, None)
    seller = graph.seller
    starts = facts.start_nodes(graph, viewed) or ([seller.id] if seller else [])
    scenario = Scenario.model_construct(id=prospect_record["id"], prospect=prospect, goal=prospect_record.get("goal") or "",
                                        seed_nodes=starts)
    lessons = author.lessons.get(like.id)
    context = ScenarioContext(playbook=ScenarioContext.model_validate(lessons).playbook) if lessons else None
    written = await write_email(author.model, graph, scenario, NodeScores(), author.config, author.judge, context,
                                seed=seed)
    return Drafted(like.id, fit, written)
