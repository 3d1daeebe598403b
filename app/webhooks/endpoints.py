from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import select

from app.deps import NOT_FOUND, ReadSession, not_found
from app.runs.models import Run
from app.webhooks.models import WebhookDelivery

router = APIRouter(tags=["webhooks"])


class DeliveryOut(BaseModel):
    event_id: str
    type: str
    attempts: int
    status: Literal["pending", "delivered", "failed"]
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None


class DeliveryList(BaseModel):
    data: list[DeliveryOut]


@router.get("/runs/{run_id}/webhook-deliveries", response_model=DeliveryList, summary="Delivery log of a run's webhooks",
            responses=NOT_FOUND)
async def list_deliveries(run_id: str, session: ReadSession) -> dict:
    if await session.get(Run, run_id) is None:
        raise not_found(f"run {run_id!r}")
    rows = (await session.scalars(
        select(WebhookDelivery).where(WebhookDelivery.run_id == run_id).order_by(WebhookDelivery.created_at, WebhookDelivery.event_id)
    )).all()
    return {"data": rows}
