"""The event log's generic shapes: the subjects events belong to, an event's payload bases, the catalogue that decodes
stored events, and the webhook delivery log. The events themselves are their domains' (`app.runs.events`,
`app.policies.events`, `app.drafts.events`)."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.kit.pages import Page


class SubjectKind(StrEnum):
    """What an event belongs to: each subject has its own list, stream, seq and webhook receiver."""

    RUN = "run"
    GRAPH = "graph"
    DRAFT_BATCH = "draft_batch"


@dataclass(frozen=True)
class Subject:
    """One subject's events. A graph may be shared by every tenant (the demo), each with its own deployment: its
    events are the tenant's."""

    kind: SubjectKind
    id: str
    tenant: str


@dataclass(frozen=True)
class Receiver:
    """A subject's webhook receiver, both parts sealed (`SecretBox`) as its owner stores them."""

    url: str
    secret: str


class EventData(BaseModel):
    """An event's `data`: the same in the events list, the live stream and the webhook. Each subject's payloads name
    their subject, then their `seq`."""

    model_config = ConfigDict(extra="forbid")
    type: ClassVar[str]


class RunEventData(EventData):
    run_id: str
    seq: int = Field(description="The event's position in its run, from 1; also the SSE id.")


class GraphEventData(EventData):
    graph_id: str
    seq: int = Field(description="The event's position among the graph's events (of your deployment), from 1; also "
                                 "the SSE id.")


class BatchEventData(EventData):
    batch_id: str
    seq: int = Field(description="The event's position in its draft batch, from 1; also the SSE id.")


@dataclass(frozen=True)
class Catalogue:
    """Every event type a subject has, so the transport can decode and end streams without knowing them."""

    payloads: Mapping[str, type[EventData]]
    terminal: frozenset[str]

    def data_json(self, type_: str, data: dict) -> str:
        """The event's `data` as its events list shows it: through its typed payload, defaults included."""
        try:
            return self.payloads[type_].model_validate(data).model_dump_json()
        except (ValueError, KeyError):  # a row the catalogue does not know (ValidationError is a ValueError): as stored
            return json.dumps(data)

    def event_models(self) -> list[type[BaseModel]]:
        """One model per event type as the events list shows it, for the OpenAPI document."""
        return [_envelope("Event", payload, id=(str, ...), seq=(int, ...), created_at=(datetime, ...))
                for payload in self.payloads.values()]

    def webhook_models(self) -> dict[str, type[BaseModel]]:
        """One model per event type as its webhook's body, for the OpenAPI document's `webhooks` section."""
        return {event_type: _envelope("Webhook", payload,
                                      timestamp=(datetime, Field(description="When the event happened.")))
                for event_type, payload in self.payloads.items()}


def _envelope(suffix: str, payload: type[EventData], **fields) -> type[BaseModel]:
    name = payload.__name__.removesuffix("Data") + suffix
    return create_model(name, type=(Literal[str(payload.type)], ...), **fields, data=(payload, ...))


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
