"""Outcomes in (the caller's, providers' webhooks, replies) and out (per run)."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, status

from app.core import ServicesDep
from app.kit.deps import BODY_ERRORS, NOT_FOUND, ErrorOut, ReadSession, TenantDep
from app.kit.pages import cursor_params
from app.outcomes import service
from app.outcomes.schemas import (
    IngestResult,
    OutcomeBatch,
    ReplyOut,
    ReplyRelabel,
    SuppressionOut,
    SuppressionsAdded,
    SuppressionsIn,
)
from app.outcomes.sources import OutcomeSourceCreate, OutcomeSourceCreated, OutcomeSourceList, OutcomeSourceOut

router = APIRouter(tags=["outcomes"])
SourceId = Annotated[str, Path(max_length=64)]


@router.post("/outcomes", response_model=IngestResult, status_code=status.HTTP_202_ACCEPTED, summary="Report outcomes",
             responses=BODY_ERRORS)
async def report_outcomes(body: OutcomeBatch, svc: ServicesDep, tenant: TenantDep) -> IngestResult:
    """What happened to sent emails, by their `ref`: each event id counts once; a ref this tenant does not know is
    acknowledged and counted as unattributed."""
    return await service.ingest(svc.db, svc.secrets, tenant, body.events,
                                accept_domain=svc.settings.reply_accept_recipient_domain)


@router.post("/outcome-sources", response_model=OutcomeSourceCreated, status_code=status.HTTP_201_CREATED,
             summary="Connect an email provider's webhooks", responses=BODY_ERRORS)
async def create_outcome_source(body: OutcomeSourceCreate, svc: ServicesDep, tenant: TenantDep) -> OutcomeSourceCreated:
    """Point the provider's event webhook at `url` and inbound mail at `inbound_url`; its verification material is
    stored sealed."""
    return await service.create_source(svc.db, svc.secrets, tenant, body)


@router.get("/outcome-sources", response_model=OutcomeSourceList, summary="The tenant's outcome sources")
async def list_outcome_sources(session: ReadSession, tenant: TenantDep) -> dict:
    """Every source the tenant connected, oldest first; their verification material is never shown."""
    return {"data": await service.list_sources(session, tenant)}


@router.get("/outcome-sources/{source_id}", response_model=OutcomeSourceOut, summary="An outcome source", responses=NOT_FOUND)
async def get_outcome_source(source_id: SourceId, session: ReadSession, tenant: TenantDep) -> OutcomeSourceOut:
    """Its provider and the URLs to point the provider at; another tenant's source is not found."""
    return OutcomeSourceOut.of(await service.source_of(session, source_id, tenant))


@router.delete("/outcome-sources/{source_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Disconnect an outcome source",
               responses=NOT_FOUND)
async def delete_outcome_source(source_id: SourceId, svc: ServicesDep, tenant: TenantDep) -> None:
    """Its webhooks are refused from now on; the outcomes it brought stay."""
    await service.delete_source(svc.db, source_id, tenant)


ReplyId = Annotated[str, Path(max_length=40)]
RepliesCursor = cursor_params(
    Annotated[str | None, Query(max_length=40, description="A reply id: the page starts after it.")],
    default_limit=100, max_limit=1000)
Address = Annotated[str, Path(min_length=3, max_length=320,
                              description="The address (any case); kept only as a keyed hash.")]


@router.patch("/replies/{reply_id}", response_model=ReplyOut, summary="Relabel a reply",
              responses={**NOT_FOUND, **BODY_ERRORS})
async def relabel_reply(reply_id: ReplyId, body: ReplyRelabel, svc: ServicesDep, tenant: TenantDep) -> ReplyOut:
    """What the reply meant, as your team reads it (`decided_by: caller`): learning reads this category from now on,
    and a relabel to `unsubscribe` suppresses its recipient. An unknown category is a 422 listing the allowed ones."""
    return await service.relabel(svc.db, svc.secrets, svc.settings, tenant, reply_id, body.category)


@router.post("/suppressions", response_model=SuppressionsAdded, status_code=status.HTTP_201_CREATED,
             summary="Suppress addresses", responses=BODY_ERRORS)
async def add_suppressions(body: SuppressionsIn, svc: ServicesDep, tenant: TenantDep) -> SuppressionsAdded:
    """Drafts write no email to these addresses, for good, until each is removed. Addresses are kept only as the keyed
    hash recipients are stored as. Unsubscribes, complaints and hard bounces are suppressed without asking; an
    out-of-office with a return date until that date."""
    return await service.add_suppressions(svc.db, svc.secrets, tenant, body)


@router.get("/suppressions/{email}", response_model=SuppressionOut, summary="Whether an address is suppressed",
            responses=NOT_FOUND)
async def get_suppression(email: Address, session: ReadSession, svc: ServicesDep, tenant: TenantDep) -> SuppressionOut:
    """Why and since when; 404 when it is not (or no longer: an out-of-office's return date has passed)."""
    return await service.suppression_of(session, svc.secrets, tenant, email)


@router.delete("/suppressions/{email}", status_code=status.HTTP_204_NO_CONTENT, summary="Lift a suppression",
               responses=NOT_FOUND)
async def delete_suppression(email: Address, svc: ServicesDep, tenant: TenantDep) -> None:
    """Drafts write to the address again (a later unsubscribe or bounce suppresses it anew)."""
    await service.lift_suppression(svc.db, svc.secrets, tenant, email)


hooks = APIRouter(tags=["outcomes"])  # public: each provider authenticates by its own scheme, not an API key
HOOK_ANSWERS = {401: {"model": ErrorOut, "description": "Bad or missing signature (or credentials), or a stale timestamp; "
                                                       "nothing is stored"},
                404: {"model": ErrorOut, "description": "Unknown source"},
                **BODY_ERRORS}  # and 422 (not the provider's payload), in the shape of every validation error


@hooks.post("/outcomes/hooks/{source_id}", response_model=IngestResult, summary="A provider's event webhook",
            responses=HOOK_ANSWERS, openapi_extra={"requestBody": {"content": {"application/json": {"schema": {}}}}})
async def receive_provider_events(source_id: SourceId, request: Request, svc: ServicesDep) -> IngestResult:
    """The provider's events, byte for byte as it sends them, verified by its scheme (SendGrid's ECDSA signature,
    Mailgun's HMAC with one-time tokens, Resend's Svix signature, Postmark's basic auth). Events of refs the source's
    tenant does not know are acknowledged and counted as unattributed, so the provider does not retry them."""
    return await service.receive_webhook(svc.db, svc.secrets, source_id, request.headers, await request.body())


INBOUND_BODY = {"requestBody": {"content": {
    "message/rfc822": {"schema": {"type": "string", "format": "binary"}},
    "application/json": {"schema": {"type": "object", "description": "Postmark's inbound webhook"}},
    "multipart/form-data": {"schema": {"type": "object", "properties": {
        "email": {"type": "string", "description": "SendGrid Inbound Parse's raw message"},
        "body-mime": {"type": "string", "description": "Mailgun's raw MIME forward"},
        "message-headers": {"type": "string", "description": "Mailgun's parsed forward: [[name, value], ...]"}}}}}}}
INBOUND_ANSWERS = {**HOOK_ANSWERS,
                   413: {"model": ErrorOut, "description": "The message is larger than MAX_INBOUND_BYTES; nothing is stored"},
                   429: {"model": ErrorOut, "description": "Too many messages are being parsed: retry after Retry-After"}}


@hooks.post("/outcomes/hooks/{source_id}/inbound", response_model=IngestResult, summary="An inbound reply",
            responses=INBOUND_ANSWERS, openapi_extra=INBOUND_BODY)
async def receive_reply(source_id: SourceId, request: Request, svc: ServicesDep) -> IngestResult:
    """A reply, as a raw RFC 822 message, SendGrid Inbound Parse's form (with "POST the raw, full MIME message"),
    Mailgun's route forward (parsed, or raw MIME at `…/inbound/mime`) or Postmark's inbound JSON, matched to its email
    by `In-Reply-To` / `References` or a `+eml_…` address. Auto-replies are recorded as such and are not replies. The
    reply's text is kept only with STORE_REPLY_TEXT. The message is parsed in a separate process within
    INBOUND_PARSE_TIMEOUT_S and the limits INBOUND_MAX_MIME_PARTS and INBOUND_MAX_MIME_DEPTH (422 beyond them)."""
    return await service.receive_reply(svc.db, svc.secrets, svc.settings, source_id, request.headers,
                                       request.headers.get("content-type", ""), await request.body())


@hooks.post("/outcomes/hooks/{source_id}/inbound/mime", response_model=IngestResult,
            summary="An inbound reply (Mailgun's raw MIME forward)", responses=INBOUND_ANSWERS, openapi_extra=INBOUND_BODY)
async def receive_reply_mime(source_id: SourceId, request: Request, svc: ServicesDep) -> IngestResult:
    """As `…/inbound`: Mailgun posts a route's message as raw MIME (`body-mime`) only to a URL that ends in "mime"."""
    return await receive_reply(source_id, request, svc)
