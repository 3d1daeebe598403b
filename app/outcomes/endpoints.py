"""Outcomes in (the caller's, providers' webhooks, replies) and out (per run)."""

from typing import Annotated

from fastapi import APIRouter, Path, status

from app.core import ServicesDep
from app.deps import BODY_ERRORS, NOT_FOUND, ReadSession, TenantDep
from app.outcomes import service
from app.outcomes.schemas import (
    IngestResult, OutcomeBatch, OutcomeSourceCreate, OutcomeSourceCreated, OutcomeSourceList, OutcomeSourceOut,
)

router = APIRouter(tags=["outcomes"])
SourceId = Annotated[str, Path(max_length=64)]


@router.post("/outcomes", response_model=IngestResult, status_code=status.HTTP_202_ACCEPTED, summary="Report outcomes",
             responses=BODY_ERRORS)
async def report_outcomes(body: OutcomeBatch, svc: ServicesDep, tenant: TenantDep) -> IngestResult:
    """What happened to sent emails, by their `ref`: each event id counts once; a ref this tenant does not know is
    acknowledged and counted as unattributed."""
    return await service.ingest(svc.db, svc.secrets, tenant, body.events)


@router.post("/outcome-sources", response_model=OutcomeSourceCreated, status_code=status.HTTP_201_CREATED,
             summary="Connect an email provider's webhooks", responses=BODY_ERRORS)
async def create_outcome_source(body: OutcomeSourceCreate, svc: ServicesDep, tenant: TenantDep) -> OutcomeSourceCreated:
    """Point the provider's event webhook at `url` and inbound mail at `inbound_url`; its verification material is
    stored sealed."""
    return await service.create_source(svc.db, svc.secrets, tenant, body)


@router.get("/outcome-sources", response_model=OutcomeSourceList, summary="The tenant's outcome sources")
async def list_outcome_sources(session: ReadSession, tenant: TenantDep) -> dict:
    return {"data": await service.list_sources(session, tenant)}


@router.get("/outcome-sources/{source_id}", response_model=OutcomeSourceOut, summary="An outcome source", responses=NOT_FOUND)
async def get_outcome_source(source_id: SourceId, session: ReadSession, tenant: TenantDep) -> OutcomeSourceOut:
    return OutcomeSourceOut.of(await service.source_of(session, source_id, tenant))


@router.delete("/outcome-sources/{source_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Disconnect an outcome source",
               responses=NOT_FOUND)
async def delete_outcome_source(source_id: SourceId, svc: ServicesDep, tenant: TenantDep) -> None:
    """Its webhooks are refused from now on; the outcomes it brought stay."""
    await service.delete_source(svc.db, source_id, tenant)
