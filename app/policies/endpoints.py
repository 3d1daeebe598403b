"""Policies (what a run learned, by iteration) and each graph's deployment: thin routes over `app.policies.service`."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from app.core import ServicesDep
from app.deps import BODY_ERRORS, NOT_FOUND, ErrorOut, ReadSession, TenantDep
from app.errors import NotFound, invalid
from app.events.endpoints import EventsCursor, LastEventId, event_stream, page_or_none, stream_responses
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.knowledge_graph import repository as graphs
from app.pages import cursor_params
from app.policies import repository, service
from app.policies.events import CATALOGUE, GraphEventList
from app.policies.schemas import DeploymentIn, DeploymentOut, PolicyList, PolicyOut
from app.runs.repository import owned_run

router = APIRouter(tags=["policies"])
PolicyId = Annotated[str, Path(min_length=1, max_length=120, description="`<run_id>@<k>`, or `<run_id>` for its latest.")]
IterationCursor = cursor_params(Annotated[int, Query(ge=-1, le=2**31 - 1, description="An iteration: the page starts after it.")],
                                first=-1, default_limit=50, max_limit=200)


@router.get("/policies/{policy_id}", response_model=PolicyOut, summary="A policy", responses=NOT_FOUND)
async def get_policy(policy_id: PolicyId, session: ReadSession, tenant: TenantDep) -> PolicyOut:
    """What a run had learned once iteration k was recorded: its checkpoint's step, its rewards, whether it is deployed."""
    return await service.view(session, await service.resolve(session, policy_id, tenant))


@router.get("/runs/{run_id}/policies", response_model=PolicyList, summary="A run's policies", responses=NOT_FOUND)
async def list_policies(run_id: str, session: ReadSession, tenant: TenantDep, page: IterationCursor) -> dict:
    """One per recorded iteration, in order (`after` = an iteration)."""
    run = await owned_run(session, run_id, tenant)
    if run is None:
        raise NotFound(f"run {run_id!r} not found")
    policies, has_more = await repository.of_run(session, run, after=page.after, limit=page.limit)
    return {"data": [await service.view(session, policy) for policy in policies], "has_more": has_more}


@router.get("/graphs/{graph_id}/deployment", response_model=DeploymentOut, summary="The policy a graph writes with",
            responses=NOT_FOUND)
async def get_deployment(graph_id: str, session: ReadSession, svc: ServicesDep, tenant: TenantDep) -> DeploymentOut:
    """The current deployment and every earlier one, the current one first."""
    return await service.deployment(session, graph_id, tenant, svc.secrets)


@router.put("/graphs/{graph_id}/deployment", response_model=DeploymentOut, summary="Deploy a policy on a graph",
            responses={**NOT_FOUND, **BODY_ERRORS, 409: {"model": ErrorOut, "description": (
                "The deployment requires evidence, and no evaluation puts the new champion ahead")}})
async def put_deployment(graph_id: str, body: DeploymentIn, svc: ServicesDep, tenant: TenantDep) -> DeploymentOut:
    """Drafts on the graph are written with this policy from now on; deploying an earlier one is a rollback. The
    graph's events go to the deployment's `webhook_url`, signed with the `webhook_secret` shown once when it is set."""
    if body.webhook_url is not None:
        try:
            await resolve(str(body.webhook_url), allow_private=svc.settings.webhook_allow_private)
        except UnsafeWebhookURL as exc:
            raise invalid("webhook_url", str(exc)) from None
    async with svc.db.transaction() as session:
        return await service.deploy(session, graph_id, body, tenant, svc.secrets)


EVENT_STREAM = stream_responses(
    'event: policy.promoted\ndata: {"graph_id":"demo","seq":1,"policy":"run_…@3","replaced":null,"trigger":"request",'
    '"gated":false,"forced":false,"evaluation":null,"evidence":null,"deployed_at":"…"}\nid: 1\n\n',
    None)  # a graph's stream goes on


@router.get("/graphs/{graph_id}/events", response_model=GraphEventList,
            summary="A graph's events, in order; live with Accept: text/event-stream",
            responses={**EVENT_STREAM, **NOT_FOUND})
async def list_graph_events(graph_id: str, request: Request, svc: ServicesDep, tenant: TenantDep, page: EventsCursor,
                            last_event_id: LastEventId = None):
    """Your deployment's events on the graph, in seq order: `deployment.changed`, `policy.promoted`,
    `policy.rolled_back`, `evaluation.succeeded`, `evaluation.failed`.

    With `Accept: text/event-stream` they stream live as Server-Sent Events, as a run's do: `id` is the seq,
    `Last-Event-ID` resumes after it, and a `: ping` comment every 15 s keeps idle connections open. A graph has no
    last event: the stream goes on until the client leaves.
    """
    after = page.after if last_event_id is None else last_event_id
    async with svc.db.read() as session:  # closed before streaming: the graph's one poller feeds every stream
        if not await graphs.visible(session, graph_id, tenant):
            raise NotFound(f"graph {graph_id!r} not found")
        listed = await page_or_none(session, request, service.graph_subject(graph_id, tenant), after, page.limit)
    if listed is not None:
        return listed
    return event_stream(svc.feed, CATALOGUE, service.graph_subject(graph_id, tenant), after=after, until=None)
