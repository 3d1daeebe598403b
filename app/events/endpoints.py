"""The webhooks a run's receiver gets, for the OpenAPI document's `webhooks` section."""

from fastapi import APIRouter

from app.events.schemas import WEBHOOK_MODELS, EventType

DESCRIPTION = (
    "POSTed to the run's `webhook_url`, signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, "
    "`webhook-signature`). Any non-2xx answer is retried with backoff; deduplicate on `webhook-id`."
)


def _receiver(model: type) -> object:
    async def receive(body: model) -> None:  # type: ignore[valid-type]
        """Documentation only: the receiver is the caller's server."""

    return receive


def document_webhooks(webhooks: APIRouter) -> None:
    for event_type, model in WEBHOOK_MODELS.items():
        webhooks.add_api_route(
            event_type.value, _receiver(model), methods=["POST"], summary=f"{event_type.value} event",
            description=DESCRIPTION, operation_id=_operation_id(event_type), status_code=200,
        )


def _operation_id(event_type: EventType) -> str:
    """`run.started` → `runStartedWebhook`."""
    first, *rest = event_type.value.replace(".", "_").split("_")
    return first + "".join(part.title() for part in rest) + "Webhook"
