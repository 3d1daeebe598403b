"""Policies (what a run learned, by iteration, and the ones kept apart from their runs) and each graph's deployment:
thin routes over `app.policies.service`. Deleting a policy takes the batches it drafted as the champion, so these
routes sit above the drafts domain."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status

from app.core import ServicesDep
from app.drafts import repository as drafts
from app.events.endpoints import EventsCursor, LastEventId, event_stream, page_or_none, stream_responses
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.kit.deps import BODY_ERRORS, NOT_FOUND, ErrorOut, ReadSession, TenantDep
from app.kit.errors import NotFound, invalid
from app.kit.pages import cursor_params
from app.knowledge_graph import repository as graphs
from app.learned import store
from app.policies import repository, service
from app.policies.events import CATALOGUE, GraphEventList
from app.policies.schemas import DeploymentIn, DeploymentOut, PolicyIn, PolicyList, PolicyOut
from app.runs import policies as kept
from app.runs.repository import owned_run

router = APIRouter(tags=["policies"])
CONFLICT = {409: {"model": ErrorOut, "description": "The policy is in use: deployed, or its sent drafts have outcomes"}}
PolicyId = Annotated[str, Path(min_length=1, max_length=120, description=(
    "Its id (`pol_…`), or its alias `<run_id>@<k>` (`<run_id>` for the run's latest)."))]
IterationCursor = cursor_params(Annotated[int, Query(ge=-1, le=2**31 - 1, description="An iteration: the page starts after it.")],
                                first=-1, default_limit=50, max_limit=200)
PolicyCursor = cursor_params(Annotated[str | None, Query(max_length=40, description="A policy id: the page starts after it.")],
                             default_limit=50, max_limit=200)


@router.post("/policies", response_model=PolicyOut, status_code=status.HTTP_201_CREATED, summary="Keep a policy",
             responses={200: {"model": PolicyOut, "description": "Kept already (from the same `from`): that policy"},
                        **BODY_ERRORS, **CONFLICT})
async def keep_policy(body: PolicyIn, response: Response, svc: ServicesDep, tenant: TenantDep) -> PolicyOut:
    """What a run had learned once iteration k was recorded, copied into a policy of its own (checkpoint, node scores,
    lessons): it outlives the run. The same `from` again answers 200 with the same policy."""
    async with svc.db.transaction() as session:
        policy, created = await kept.keep(session, body.source, tenant, svc.settings, field="from", name=body.name)
        view = await service.view(session, policy, svc.settings)
    if not created:
        response.status_code = status.HTTP_200_OK
    return view


@router.get("/policies", response_model=PolicyList, summary="Kept policies")
async def list_kept_policies(svc: ServicesDep, session: ReadSession, tenant: TenantDep, page: PolicyCursor,
                             graph_id: Annotated[str | None, Query(max_length=200)] = None) -> dict:
    """The tenant's kept policies, oldest first, optionally of one graph (`after` = a policy id)."""
    policies, has_more = await store.page(session, tenant, graph_id, after=page.after, limit=page.limit)
    return {"data": [await service.view(session, p, svc.settings) for p in policies], "has_more": has_more}


@router.get("/policies/{policy_id}", response_model=PolicyOut, summary="A policy", responses=NOT_FOUND)
async def get_policy(policy_id: PolicyId, svc: ServicesDep, session: ReadSession, tenant: TenantDep) -> PolicyOut:
    """A kept policy by id or alias (its run may be deleted); an iteration not kept, as its run recorded it."""
    return await service.view(session, await service.find(session, policy_id, tenant), svc.settings)


@router.delete("/policies/{policy_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a kept policy",
               responses={**NOT_FOUND, **CONFLICT})
async def delete_policy(policy_id: Annotated[str, Path(min_length=1, max_length=40)], svc: ServicesDep,
                        tenant: TenantDep, discard_sends: Annotated[bool, Query(description=(
                            "Also discard the outcomes of the drafts it wrote that were sent: without it, such a policy "
                            "is a 409, since every evaluation of a policy that drafted beside them reads them."))] = False,
                        ) -> Response:
    """The policy, its checkpoint's copy and the batches it drafted as the champion. 409 while deployed (as champion
    or challenger), or while drafts with outcomes use it unless `discard_sends`."""
    async with svc.db.transaction() as session:
        policy = await service.deletable(session, policy_id, tenant, discard_sends,
                                         await drafts.sent_drafts(session, policy_id.strip()))
        await drafts.discard_refs(session, policy.id)
        await repository.delete(session, policy)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/runs/{run_id}/policies", response_model=PolicyList, summary="A run's policies", responses=NOT_FOUND)
async def list_policies(run_id: str, svc: ServicesDep, session: ReadSession, tenant: TenantDep, page: IterationCursor
                        ) -> dict:
    """One per recorded iteration, in order (`after` = an iteration); a kept one as kept."""
    run = await owned_run(session, run_id, tenant)
    if run is None:
        raise NotFound(f"run {run_id!r} not found")
    policies, has_more = await repository.of_run(session, run, after=page.after, limit=page.limit)
    return {"data": await service.views_of_run(session, policies, svc.settings), "has_more": has_more}


@router.get("/graphs/{graph_id}/deployment", response_model=DeploymentOut, summary="The policy a graph writes with",
            responses=NOT_FOUND)
async def get_deployment(graph_id: str, session: ReadSession, svc: ServicesDep, tenant: TenantDep) -> DeploymentOut:
    """The current deployment and every earlier one, the current one first."""
    return await service.deployment(session, graph_id, tenant, svc.secrets)


@router.put("/graphs/{graph_id}/deployment", response_model=DeploymentOut, summary="Deploy a policy on a graph",
            responses={**NOT_FOUND, **BODY_ERRORS, 409: {"model": ErrorOut, "description": (
                "The deployment requires evidence, and no evaluation puts the new champion ahead")}})
async def put_deployment(graph_id: str, body: DeploymentIn, svc: ServicesDep, tenant: TenantDep) -> DeploymentOut:
    """Drafts on the graph are written with this policy from now on (kept, if it was not); deploying an earlier one
    is a rollback. The graph's events go to the deployment's `webhook_url`, signed with the `webhook_secret` shown
    once when it is set."""
    if body.webhook_url is not None:
        try:
            await resolve(str(body.webhook_url), allow_private=svc.settings.webhook_allow_private)
        except UnsafeWebhookURL as exc:
            raise invalid("webhook_url", str(exc)) from None
    async with svc.db.transaction() as session:
        return await service.deploy(session, graph_id, body, tenant, svc.settings, svc.secrets)


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
