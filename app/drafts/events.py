"""The catalogue of a draft batch's events.

The same payload is an event's `data` in `GET /draft-batches/{batch_id}/events`, in its live stream, and in the webhook
POSTed to the batch's `webhook_url`. A batch ends with `draft_batch.succeeded`, `draft_batch.failed` or
`draft_batch.cancelled` (a failed batch resumed ends again, with an event of a later seq); a `reply.received`
follows for each reply to one of its drafts.
"""

from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import Field

from app.drafts.schemas import BatchStatus
from app.events.schemas import BatchEventData, Catalogue
from app.kit.pages import Page
from app.outcomes.replies import ReplyCategory


class BatchEventType(StrEnum):
    DRAFT_BATCH_SUCCEEDED = "draft_batch.succeeded"
    DRAFT_BATCH_FAILED = "draft_batch.failed"
    DRAFT_BATCH_CANCELLED = "draft_batch.cancelled"
    REPLY_RECEIVED = "reply.received"


class BatchEndedData(BatchEventData):
    status: BatchStatus
    count: int = Field(description="Prospects in the batch.")
    completed: int = Field(description="Prospects drafted.")
    policy: str = Field(description="The policy the batch names, `<run_id>@<k>`.")
    error: dict | None = Field(description="`{\"message\", \"step\"}` of a failed batch; null otherwise.")


class DraftBatchSucceededData(BatchEndedData):
    """Every prospect of the batch was drafted (a prospect the policy wrote no email for counts as drafted)."""

    type = BatchEventType.DRAFT_BATCH_SUCCEEDED
    status: Literal[BatchStatus.SUCCEEDED] = BatchStatus.SUCCEEDED


class DraftBatchFailedData(BatchEndedData):
    """The batch failed, once every chunk had ended: the drafts stored stand, `error` says why."""

    type = BatchEventType.DRAFT_BATCH_FAILED
    status: Literal[BatchStatus.FAILED] = BatchStatus.FAILED


class DraftBatchCancelledData(BatchEndedData):
    """The batch was cancelled (`POST /draft-batches/{batch_id}/cancel`): the drafts stored stand, no more are
    written."""

    type = BatchEventType.DRAFT_BATCH_CANCELLED
    status: Literal[BatchStatus.CANCELLED] = BatchStatus.CANCELLED


class BatchReplyReceivedData(BatchEventData):
    """A prospect replied to its draft, with what the reply meant, so that a CRM can route it at once."""

    type = BatchEventType.REPLY_RECEIVED
    ref: str = Field(description="The draft's email ref.")
    category: ReplyCategory
    confidence: float
    prospect_id: str | None = Field(description="The prospect who replied.")


PAYLOADS: dict[BatchEventType, type[BatchEventData]] = {
    data.type: data for data in (DraftBatchSucceededData, DraftBatchFailedData, DraftBatchCancelledData,
                                 BatchReplyReceivedData)
}
CATALOGUE = Catalogue(PAYLOADS, frozenset(PAYLOADS) - {BatchEventType.REPLY_RECEIVED})
AnyBatchEvent = Annotated[Union[tuple(CATALOGUE.event_models())], Field(discriminator="type")]  # noqa: UP007


class BatchEventList(Page[AnyBatchEvent]):
    """A draft batch's events in seq order."""
