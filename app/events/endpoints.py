"""The webhooks a run's receiver gets, for the OpenAPI document's `webhooks` section."""

from collections.abc import Mapping

from fastapi import APIRouter

DESCRIPTION = (
    "POSTed to the run's `webhook_url`, signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, "
    "`webhook-signature`). Any non-2xx answer is retried with backoff; deduplicate on `webhook-id`."
)


def _receiver(model: type) -> object:
    async def receive(body: model) -> None:  # type: ignore[valid-type]
        """Documentation only: the receiver is the caller's server."""

    return receive


WEBHOOK_TAG = "webhook events"  # listed after the API's own tags (app.kit.docs.tag_order)


def document_webhooks(webhooks: APIRouter, models: Mapping[str, type]) -> None:
    """One entry per event type, named by the type (`run.started`), with its webhook body."""
    for event_type, model in models.items():
        webhooks.add_api_route(
            event_type, _receiver(model), methods=["POST"], summary=f"{event_type} event",
            description=DESCRIPTION, operation_id=_operation_id(event_type), status_code=200, tags=[WEBHOOK_TAG],
        )


def _operation_id(event_type: str) -> str:
    """`run.started` → `runStartedWebhook`."""
    first, *rest = event_type.replace(".", "_").split("_")
    return first + "".join(part.title() for part in rest) + "Webhook"
