"""Evaluations: thin routes over `app.evaluations.service`."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from app.core import ServicesDep
from app.evaluations import service
from app.evaluations.schemas import EvaluationCreated, EvaluationIn, EvaluationList, EvaluationOut
from app.kit.deps import BODY_ERRORS, NOT_FOUND, ErrorOut, ReadSession, TenantDep
from app.kit.pages import cursor_params

router = APIRouter(tags=["evaluations"])


CONFLICT = {409: {"model": ErrorOut, "description": "The evaluation has finished"}}
TOO_MANY = {429: {"model": ErrorOut, "description": "The tenant has MAX_ACTIVE_EVALUATIONS_PER_TENANT evaluations "
                                                    "queued or running", "headers": {"Retry-After": {
    "description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}}}


@router.post("/evaluations", response_model=EvaluationCreated, status_code=status.HTTP_202_ACCEPTED,
             summary="Compare policies", responses={**TOO_MANY, **BODY_ERRORS})
async def create_evaluation(body: EvaluationIn, svc: ServicesDep, tenant: TenantDep) -> EvaluationCreated:
    """Each policy writes for held-out prospects (judged, and its reply rate predicted by the outcome model), and its
    reply rate is estimated off-policy (IPS, SNIPS, doubly robust) from the drafts already sent; 90 % intervals. Runs
    durably on the workers."""
    return await service.create(svc, body, tenant)


@router.post("/evaluations/{evaluation_id}/cancel", response_model=EvaluationOut, status_code=status.HTTP_202_ACCEPTED,
             summary="Cancel an evaluation", responses={**CONFLICT, **NOT_FOUND})
async def cancel_evaluation(evaluation_id: Annotated[str, Path(max_length=40)], svc: ServicesDep,
                            tenant: TenantDep) -> EvaluationOut:
    """A queued or running evaluation ends `cancelled`, with no result and no promotion; a finished one → 409."""
    return await service.cancel(svc, evaluation_id, tenant)


EvaluationCursor = cursor_params(Annotated[str | None, Query(max_length=40, description="An evaluation id: the page "
                                                                                       "starts after it.")],
                                default_limit=20, max_limit=100)


@router.get("/evaluations", response_model=EvaluationList, summary="List evaluations")
async def list_evaluations(session: ReadSession, tenant: TenantDep, page: EvaluationCursor,
                           graph_id: Annotated[str | None, Query(max_length=200)] = None) -> dict:
    """The tenant's evaluations, newest first, optionally of one graph."""
    data, has_more = await service.page(session, tenant, graph_id, after=page.after, limit=page.limit)
    return {"data": data, "has_more": has_more}


@router.get("/evaluations/{evaluation_id}", response_model=EvaluationOut, summary="An evaluation", responses=NOT_FOUND)
async def get_evaluation(evaluation_id: Annotated[str, Path(max_length=40)], session: ReadSession,
                         tenant: TenantDep) -> EvaluationOut:
    """Its status and, once succeeded, the result per policy."""
    return await service.get(session, evaluation_id, tenant)
