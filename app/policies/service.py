"""Who may read, keep, deploy and write with a policy."""

from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.specs import SPECS, base_model
from app.events import service as events
from app.events.models import Event
from app.events.schemas import GraphEventData, Receiver, Subject, SubjectKind
from app.events.signing import SecretBox, new_secret
from app.events.ssrf import redacted
from app.kit.db import utcnow
from app.kit.errors import Conflict, NotFound, invalid
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs
from app.learned import store
from app.learned.models import Deployment, Evaluation, Policy, TrafficArm
from app.learned.store import PolicyRef, policy_id
from app.policies import repository
from app.policies.events import DeploymentChangedData, PolicyPromotedData, PolicyRolledBackData, PromotionEvidence
from app.policies.evidence import Verdict, verdict
from app.policies.repository import LearnedPolicy
from app.policies.schemas import (
    Arm,
    DeploymentIn,
    DeploymentOut,
    DeploymentRecord,
    EvaluationResult,
    PolicyOut,
)
from app.runs import policies as kept
from app.runs import repository as runs
from app.runs.models import Run
from app.stats.bandit import champion_share


async def find(session: AsyncSession, text: str, tenant: str) -> Policy | LearnedPolicy:
    """For reading, keeping nothing: the tenant's kept policy of that id or alias, else the run's iteration as the run
    recorded it (404 when neither is)."""
    text = text.strip()
    if store.is_own_id(text):
        if (policy := await store.owned(session, text, tenant)) is None:
            raise NotFound(f"policy {text[:120]!r} not found")
        return policy
    ref = PolicyRef.parse(text)
    if ref is None:
        raise NotFound(f"{text[:120]!r} is no policy id: write 'pol_…', '<run_id>@<iteration>' or '<run_id>'")
    live = await repository.find(session, ref, tenant)
    source = live.id if live is not None else policy_id(ref.run_id, ref.iteration) if ref.iteration is not None else None
    policy = await store.by_source(session, source) if source else None
    if policy is not None and policy.tenant == tenant:
        return policy
    if live is None:
        raise NotFound(f"policy {text!r} not found: no such policy or run of yours, or no such iteration recorded")
    return live


async def view(session: AsyncSession, policy: Policy | LearnedPolicy, settings: Settings) -> PolicyOut:
    """A kept policy as kept; an iteration not kept, as its run recorded it (its alias for an id)."""
    if isinstance(policy, Policy):
        return PolicyOut(id=policy.id, name=policy.name, source=policy.source, kept=True, run_id=policy.run_id,
                         iteration=policy.iteration, graph_id=policy.graph_id, backend=policy.backend,
                         base_model=policy.base_model, training_step=policy.training_step, created_at=policy.created_at,
                         reward=policy.reward,
                         deployed=await repository.is_deployed(session, policy.graph_id, policy.tenant, policy.source))
    return PolicyOut(id=policy.id, name=None, source=policy.id, kept=False, run_id=policy.run_id,
                     iteration=policy.iteration, graph_id=policy.graph_id, backend=policy.backend,
                     base_model=base_model(policy.backend, settings), training_step=policy.training_step,
                     created_at=policy.created_at, reward=policy.reward,
                     deployed=await repository.is_deployed(session, policy.graph_id, policy.tenant, policy.id))


async def views_of_run(session: AsyncSession, policies: list[LearnedPolicy], settings: Settings) -> list[PolicyOut]:
    """A run's iterations, each as kept where it was."""
    kept_ones = await store.of_sources(session, {p.id for p in policies})
    return [await view(session, kept_ones.get(p.id, p), settings) for p in policies]


async def deletable(session: AsyncSession, policy_id_: str, tenant: str, discard_sends: bool, sent: int) -> Policy:
    """The tenant's kept policy, unless deployed (409), or unless `sent` drafts with outcomes use it and the request
    does not say to discard them (409)."""
    policy = await store.owned(session, policy_id_, tenant)
    if policy is None:
        raise NotFound(f"policy {policy_id_[:120]!r} not found")
    if await repository.deployed(session, policy):
        raise Conflict(f"policy {policy.id!r} is deployed on graph {policy.graph_id!r}; deploy another first "
                       f"(PUT /graphs/{policy.graph_id}/deployment)")
    if sent and not discard_sends:
        raise Conflict(f"deleting policy {policy.id!r} deletes {sent} drafts on graph {policy.graph_id!r} that were sent "
                       "and have outcomes (those it wrote, and those of the batches it drafted as the champion): they are "
                       "logged sends that evaluations of the policies drafting beside them read; DELETE with "
                       "?discard_sends=true to delete them with it")
    return policy


def _arms(row: Deployment) -> list[Arm]:
    return [Arm(policy=policy_id(c.run_id, c.iteration), share=c.share) for c in row.challengers or []]


def _record(row: Deployment) -> DeploymentRecord:
    return DeploymentRecord(policy=policy_id(row.run_id, row.iteration), challengers=_arms(row), deployed_at=row.deployed_at,
                            forced=row.forced, evaluation=row.evaluation_id, trigger=row.trigger, rollback=row.rollback,
                            event=row.event_id)


async def deployment(session: AsyncSession, graph_id: str, tenant: str, box: SecretBox) -> DeploymentOut:
    await _visible_graph(session, graph_id, tenant)
    rows = await repository.history(session, graph_id, tenant)
    if not rows:
        return DeploymentOut(graph_id=graph_id, policy=None, share=None, challengers=[], require_evidence=False,
                             sequential=False, traffic="fixed", floor=DeploymentIn.model_fields["floor"].default,
                             min_sends=DeploymentIn.model_fields["min_sends"].default, auto_promote=False,
                             deployed_at=None, history=[])
    current = rows[0]
    challengers = _arms(current)
    auto = current.traffic == "auto"
    return DeploymentOut(graph_id=graph_id, policy=policy_id(current.run_id, current.iteration),
                         share=None if auto else champion_share([c.share for c in challengers]), challengers=challengers,
                         require_evidence=current.require_evidence, sequential=current.sequential,
                         traffic=current.traffic, floor=current.floor,
                         min_sends=current.min_sends, auto_promote=current.auto_promote, deployed_at=current.deployed_at,
                         webhook_url=redacted(box.open_url(current.webhook_url)) if current.webhook_url else None,
                         history=[_record(row) for row in rows])


async def deployable(session: AsyncSession, text: str, tenant: str, graph_id: str, field: str,
                     settings: Settings) -> Policy:
    """The policy, kept, if a graph's drafts can be written with it: of this graph, its run finished (or deleted since
    it was kept), its checkpoint kept."""
    policy, _ = await kept.keep(session, text, tenant, settings, field=field)  # refused, the keeping is rolled back
    if policy.graph_id != graph_id:
        raise invalid(field, f"policy {policy.source!r} was learned on graph {policy.graph_id!r}, not on graph {graph_id!r}")
    run = await session.get(Run, policy.run_id)
    if run is not None and not run.status.terminal:
        raise invalid(field, f"run {run.id!r} is {run.status}; deploy its policies once it has finished")
    if run is not None and policy.training_step is not None and not SPECS[policy.backend].keeps_every_checkpoint:
        latest = await runs.latest_iteration(session, policy.run_id)
        if policy.iteration != latest:
            raise invalid(field, f"backend {policy.backend!r} keeps a finished run's latest and best checkpoints only: "
                                 f"deploy {policy.run_id!r}@{latest}")
    return policy


async def deploy(session: AsyncSession, graph_id: str, body: DeploymentIn, tenant: str, settings: Settings,
                 box: SecretBox) -> DeploymentOut:
    """Promotes the champion with its challengers (a rollback is the promotion of an earlier one). A policy is
    deployable once its run finished. Where the deployment requires evidence (as it stands, or as this request asks), a
    new champion needs the latest evaluation of both to put it ahead (409 saying what it shows), unless `force`, which
    is recorded. A new champion
    is announced on the graph as `policy.promoted` (or `policy.rolled_back`), a new deployment that keeps it as
    `deployment.changed`; a refusal is not announced."""
    await _visible_graph(session, graph_id, tenant)
    await graphs.lock(session, graph_id)  # promotions of one graph take turns
    champion = await deployable(session, body.policy, tenant, graph_id, "policy", settings)
    challengers = [await deployable(session, c.policy, tenant, graph_id, f"challengers.{i}.policy", settings)
                   for i, c in enumerate(body.challengers)]
    if len({champion.id, *(c.id for c in challengers)}) != 1 + len(challengers):
        raise invalid("challengers", "a policy appears twice among the champion and its challengers")
    current = await store.current_deployment(session, graph_id, tenant)
    require = body.require_evidence if body.require_evidence is not None else bool(current and current.require_evidence)
    sequential = body.sequential if body.sequential is not None else bool(current and current.sequential)
    # the gate in force judges this very promotion: a PUT that lifts or loosens it does so for later ones
    gated = require or bool(current and current.require_evidence)
    strict = sequential or bool(current and current.require_evidence and current.sequential)
    evaluation_id, forced, found = None, False, None
    incumbent = policy_id(current.run_id, current.iteration) if current else None
    if gated and incumbent is not None and incumbent != champion.source:
        evaluation = await repository.latest_evaluation(session, graph_id, tenant, {champion.source, incumbent})
        found = (verdict(EvaluationResult.model_validate(evaluation.result), champion.source, incumbent,
                         min_recipients=settings.promotion_min_recipients, sequential=strict,
                         guardrail=settings.unsubscribe_guardrail) if evaluation
                 else Verdict(False, f"no evaluation compares {champion.source!r} with the champion {incumbent!r}: "
                                     "POST /evaluations with both"))
        if found.ahead:
            evaluation_id = evaluation.id
        elif body.force:
            forced, evaluation_id = True, evaluation.id if evaluation else None
        else:
            raise Conflict(f"graph {graph_id!r} requires evidence to promote a new champion: {found.message} "
                           "(or promote with \"force\": true, which is recorded)")
    webhook_url, webhook_secret, shown = _receiver(body, current, box)
    row = Deployment(
        graph_id=graph_id, tenant=tenant, policy_id=champion.id, run_id=champion.run_id, iteration=champion.iteration,
        webhook_url=webhook_url, webhook_secret=webhook_secret,
        challengers=[TrafficArm(policy_id=c.id, run_id=c.run_id, iteration=c.iteration, share=arm.share)
                     for c, arm in zip(challengers, body.challengers, strict=True)],
        traffic=body.traffic, floor=body.floor, min_sends=body.min_sends, auto_promote=body.auto_promote,
        require_evidence=require, sequential=sequential, forced=forced, evaluation_id=evaluation_id,
        trigger="request")
    if incumbent != champion.source:  # a new champion; the same one with other challengers or traffic is no promotion
        await _promote(session, row, incumbent, gated=gated and incumbent is not None, found=found)
    else:
        row.deployed_at = utcnow()
        session.add(row)
        await session.flush()  # the graph's receiver is the new deployment's
        event = await announce(session, graph_id, tenant, DeploymentChangedData, policy=champion.source,
                               challengers=_arms(row), traffic=row.traffic, require_evidence=row.require_evidence,
                               sequential=row.sequential, auto_promote=row.auto_promote, deployed_at=row.deployed_at)
        row.event_id = event.id
    await session.flush()
    return (await deployment(session, graph_id, tenant, box)).model_copy(update={"webhook_secret": shown})


def _receiver(body: DeploymentIn, current: Deployment | None, box: SecretBox) -> tuple[str | None, str | None, str | None]:
    """The new deployment's receiver, sealed (URL, secret), and its secret when new, to show once: the current one's
    unless the request names one; the same URL again keeps its secret."""
    if "webhook_url" not in body.model_fields_set:
        return (current.webhook_url, current.webhook_secret, None) if current else (None, None, None)
    if body.webhook_url is None:
        return None, None, None
    url = str(body.webhook_url)
    if current is not None and current.webhook_url and box.open_url(current.webhook_url) == url:
        return current.webhook_url, current.webhook_secret, None
    secret = new_secret()
    return box.seal(url), box.seal(secret), secret


async def promote_if_ahead(session: AsyncSession, evaluation: Evaluation, min_recipients: int,
                           guardrail: float) -> str | None:
    """With `auto_promote`, the first challenger the evaluation puts ahead of the champion, on replies of at least
    `min_recipients` distinct verified recipients and within the unsubscribe `guardrail`, becomes champion (the old
    champion takes its place among the challengers), announced on the graph; returns it, or None."""
    current = await store.current_deployment(session, evaluation.graph_id, evaluation.tenant)
    if current is None or not current.auto_promote or evaluation.result is None:
        return None
    result = EvaluationResult.model_validate(evaluation.result)
    champion = policy_id(current.run_id, current.iteration)
    for index, challenger in enumerate(current.challengers or []):
        found = verdict(result, policy_id(challenger.run_id, challenger.iteration), champion,
                        min_recipients=min_recipients, sequential=current.sequential, guardrail=guardrail)
        if found.ahead:
            demoted = TrafficArm(policy_id=current.policy_id, run_id=current.run_id, iteration=current.iteration,
                                 share=challenger.share)
            row = Deployment(
                graph_id=current.graph_id, tenant=current.tenant, policy_id=challenger.policy_id,
                run_id=challenger.run_id, iteration=challenger.iteration,
                challengers=[*current.challengers[:index], demoted, *current.challengers[index + 1:]],
                traffic=current.traffic, floor=current.floor, min_sends=current.min_sends, auto_promote=True,
                require_evidence=current.require_evidence, sequential=current.sequential, forced=False,
                evaluation_id=evaluation.id, trigger="auto_promote", webhook_url=current.webhook_url,
                webhook_secret=current.webhook_secret)
            await _promote(session, row, champion, gated=current.require_evidence, found=found)
            return policy_id(row.run_id, row.iteration)
    return None


async def _promote(session: AsyncSession, row: Deployment, replaced: str | None, *, gated: bool,
                   found: Verdict | None) -> None:
    """Adds the deployment of a new champion and announces it on the graph, in the same transaction: the history and
    the event log never disagree. A champion the graph had before makes it a rollback."""
    row.rollback = await repository.was_champion(session, row.graph_id, row.tenant, row.policy_id)
    row.deployed_at = utcnow()
    evidence = None
    if row.evaluation_id is not None and found is not None and found.estimator is not None:
        evidence = PromotionEvidence(estimator=found.estimator, policy=found.challenger, replaced=found.champion,
                                     ahead=found.ahead, sequential=found.sequential)
    session.add(row)
    await session.flush()  # the graph's receiver is the new deployment's
    event = await announce(
        session, row.graph_id, row.tenant, PolicyRolledBackData if row.rollback else PolicyPromotedData,
        policy=policy_id(row.run_id, row.iteration), replaced=replaced, trigger=row.trigger, gated=gated,
        forced=row.forced, evaluation=row.evaluation_id, evidence=evidence, deployed_at=row.deployed_at)
    row.event_id = event.id


async def _visible_graph(session: AsyncSession, graph_id: str, tenant: str) -> None:
    if not await graphs.visible(session, graph_id, tenant):
        raise NotFound(f"graph {graph_id!r} not found")


def graph_subject(graph_id: str, tenant: str) -> Subject:
    """Whom a graph's events belong to: the tenant's deployment on it (a shared graph has one per tenant)."""
    return Subject(SubjectKind.GRAPH, graph_id, tenant)


async def announce(session: AsyncSession, graph_id: str, tenant: str, payload_type: type[GraphEventData],
                   **data) -> Event:
    """An event of the tenant's deployment on the graph, in the caller's transaction, which holds the graph's lock
    (`graphs.lock`, as promotions do): the graph's next seq, and a delivery to the current deployment's receiver."""
    subject = graph_subject(graph_id, tenant)
    seq = await events.last_seq(session, subject) + 1
    current = await store.current_deployment(session, graph_id, tenant)
    receiver = Receiver(current.webhook_url, current.webhook_secret) if current and current.webhook_url else None
    return await events.emit(session, subject, payload_type(graph_id=graph_id, seq=seq, **data), receiver)
