"""The event log's generic shapes: an event's payload base, the catalogue that decodes stored events,
and the webhook delivery log. The run events themselves are the runs domain's (`app.runs.events`)."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from app.kit.pages import Page


class EventData(BaseModel):
    """An event's `data`: the same in the events list, the live stream and the webhook."""

    model_config = ConfigDict(extra="forbid")
    type: ClassVar[str]

    run_id: str
    seq: int = Field(description="The event's position in its run, from 1; also the SSE id.")


@dataclass(frozen=True)
class Catalogue:
    """Every event type a domain emits, so the transport can decode and end streams without knowing them."""

    payloads: Mapping[str, type[EventData]]
    terminal: frozenset[str]

    def data_json(self, type_: str, data: dict) -> str:
        """The event's `data` as `GET /runs/{id}/events` shows it: through its typed payload, defaults included."""
        try:
            return self.payloads[type_].model_validate(data).model_dump_json()
        except (ValueError, KeyError):  # a row the catalogue does not know (ValidationError is a ValueError): as stored
            return json.dumps(data)


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class AttemptOut(BaseModel):
    attempt: int = Field(description="1 for the first attempt of the event, then one more for each retry.")
    at: datetime = Field(description="When the attempt started.")
    status_code: int | None = Field(description="The receiver's answer; null when there was none (see `error`).")
    error: str | None = Field(description="Why the attempt failed (a non-2xx answer, a timeout, a refused address, ...); null when delivered.")
    duration_ms: float = Field(description="From the address check to the end of the answer, or to the deadline.")


class DeliveryOut(BaseModel):
    event_id: str
    type: str
    attempts: int
    status: DeliveryStatus
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    attempts_log: list[AttemptOut] = Field(default_factory=list, description="Every attempt, oldest first.")


class DeliveryList(Page[DeliveryOut]):
    """Each webhook delivery of a run, with its attempts."""
