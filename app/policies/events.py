"""The catalogue of a graph's events: what happened to the deployment your drafts on a graph are written with.

The same payload is an event's `data` in `GET /graphs/{graph_id}/events`, in its live stream, and in the webhook POSTed
to the deployment's `webhook_url`. A graph has no last event: its stream goes on while the client listens.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field

from app.events.schemas import Catalogue, GraphEventData
from app.kit.pages import Page
from app.policies.schemas import Arm
from app.stats.intervals import Interval


class GraphEventType(StrEnum):
    DEPLOYMENT_CHANGED = "deployment.changed"
    POLICY_PROMOTED = "policy.promoted"
    POLICY_ROLLED_BACK = "policy.rolled_back"
    EVALUATION_SUCCEEDED = "evaluation.succeeded"
    EVALUATION_FAILED = "evaluation.failed"


class DeploymentChangedData(GraphEventData):
    """A `PUT` of the deployment that kept its champion: its challengers, their shares, its traffic or its gate
    changed."""

    type = GraphEventType.DEPLOYMENT_CHANGED
    policy: str = Field(description="The champion, unchanged.")
    challengers: list[Arm]
    traffic: Literal["fixed", "auto"]
    require_evidence: bool
    sequential: bool
    auto_promote: bool
    deployed_at: datetime = Field(description="The deployment's `deployed_at` in the graph's history.")


class PromotionEvidence(BaseModel):
    """What the evaluation showed of the new champion against the one it replaced, as the gate read it."""

    estimator: Literal["DR", "SNIPS"] = Field(description="DR where the outcome model could predict, else SNIPS.")
    policy: Interval = Field(description="The promoted policy's off-policy reply rate.")
    replaced: Interval = Field(description="The replaced champion's.")
    ahead: bool = Field(description="The 90 % interval of the difference between the two lies above zero.")
    sequential: bool = Field(False, description="That interval was the always-valid one (the deployment's `sequential`).")


class PolicyPromotedData(GraphEventData):
    """A policy became the graph's champion, by a `PUT` of the deployment or by auto-promotion, with the evaluation
    that justified it."""

    type = GraphEventType.POLICY_PROMOTED
    policy: str = Field(description="The new champion, `<run_id>@<k>`.")
    replaced: str | None = Field(description="The champion it replaced; null for the graph's first deployment.")
    trigger: Literal["request", "auto_promote"] = Field(description=(
        "`request`: a `PUT /graphs/{graph_id}/deployment`; `auto_promote`: an evaluation put it ahead of the champion."))
    gated: bool = Field(description="The deployment required evidence for a new champion (`require_evidence`).")
    forced: bool = Field(description="Promoted by `force` against, or without, the evidence the gate asked for.")
    evaluation: str | None = Field(description="The evaluation the gate read (`GET /evaluations/{id}`); null when the "
                                               "promotion was not gated, or forced with no evaluation of both.")
    evidence: PromotionEvidence | None = Field(description="What that evaluation showed; null without one.")
    deployed_at: datetime = Field(description="The deployment's `deployed_at` in the graph's history.")


class PolicyRolledBackData(PolicyPromotedData):
    """A policy became the graph's champion again: a rollback, with what justified it."""

    type = GraphEventType.POLICY_ROLLED_BACK


class EvaluationSucceededData(GraphEventData):
    """An evaluation of policies on this graph finished; its result is at `GET /evaluations/{id}`."""

    type = GraphEventType.EVALUATION_SUCCEEDED
    evaluation: str
    policies: list[str] = Field(description="The policies it compared.")


class EvaluationFailedData(GraphEventData):
    """An evaluation of policies on this graph failed."""

    type = GraphEventType.EVALUATION_FAILED
    evaluation: str
    policies: list[str] = Field(description="The policies it was to compare.")
    error: str = Field(description="Why it failed.")


PAYLOADS: dict[GraphEventType, type[GraphEventData]] = {
    data.type: data for data in (DeploymentChangedData, PolicyPromotedData, PolicyRolledBackData,
                                 EvaluationSucceededData, EvaluationFailedData)
}
CATALOGUE = Catalogue(PAYLOADS, frozenset())
AnyGraphEvent = Annotated[Union[tuple(CATALOGUE.event_models())], Field(discriminator="type")]  # noqa: UP007


class GraphEventList(Page[AnyGraphEvent]):
    """A graph's events (of your deployment) in seq order."""
