"""Evaluations: thin routes over `app.evaluations.service`."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from app.core import ServicesDep
from app.evaluations import service
from app.evaluations.schemas import EvaluationCreated, EvaluationIn, EvaluationList, EvaluationOut
from app.kit.deps import BODY_ERRORS, NOT_FOUND, ReadSession, TenantDep
from app.kit.pages import cursor_params

router = APIRouter(tags=["evaluations"])


@router.post("/evaluations", response_model=EvaluationCreated, status_code=status.HTTP_202_ACCEPTED,
             summary="Compare policies", responses=BODY_ERRORS)
async def create_evaluation(body: EvaluationIn, svc: ServicesDep, tenant: TenantDep) -> EvaluationCreated:
    """Each policy writes for held-out prospects (judged, and its reply rate predicted by the outcome model), and its
    reply rate is estimated off-policy (IPS, SNIPS, doubly robust) from the drafts already sent; 90 % intervals. Runs
    durably on the workers."""
    return await service.create(svc, body, tenant)


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
