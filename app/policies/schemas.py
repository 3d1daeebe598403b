"""Policies as the API shows them (kept ones by id `pol_…`, any by alias `<run_id>@<k>`), and the policy a graph
writes with."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.events.ssrf import WebhookURL
from app.kit.pages import Page
from app.loop.schemas import RewardStats
from app.stats.estimators import OffPolicy
from app.stats.intervals import Interval


class PolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: str = Field(alias="from", min_length=1, max_length=120, description=(
        "`<run_id>@<k>` (or `<run_id>` for its latest iteration): what the run had learned once iteration k was "
        "recorded."))
    name: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[^\x00]*$")


class PolicyOut(BaseModel):
    id: str = Field(description="Its own id (`pol_…`) once kept; for an iteration not kept, its alias `<run_id>@<k>`.")
    name: str | None = Field(description="The name it was kept with, if any.")
    source: str = Field(description="`<run_id>@<k>`: where it came from, an alias that keeps resolving to it.")
    kept: bool = Field(description="Kept as a policy of its own (deployed, drafted with, evaluated, forked or kept with "
                                   "`POST /policies`): it outlives its run.")
    run_id: str
    iteration: int
    graph_id: str
    backend: str
    base_model: str = Field(description="The model its checkpoint was trained from (or, `openai`, the model it serves).")
    training_step: int | None = Field(description="The checkpoint's training step (trainable backends); null otherwise.")
    created_at: datetime = Field(description="When it was kept; for an iteration not kept, when it was recorded.")
    reward: RewardStats | None = Field(description="The iteration's rewards; null for iteration 0, the untrained policy.")
    deployed: bool = Field(description="The champion of its graph's current deployment (a challenger beside it is "
                                       "not).")


class PolicyList(Page[PolicyOut]):
    pass


class ChallengerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str = Field(min_length=1, max_length=120)
    share: float | None = Field(None, gt=0, le=1, description="The share of prospects it drafts for (with `traffic` "
                                                                "`fixed`, required; with `auto`, not given).")


class DeploymentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: str = Field(min_length=1, max_length=120, description="The champion: a policy id, `<run_id>@<k>`, or "
                                                                  "`<run_id>` for its latest iteration.")
    challengers: list[ChallengerIn] = Field(default_factory=list, max_length=3, description=(
        "Up to three policies that draft a share of the prospects beside the champion, which drafts the rest."))
    require_evidence: bool | None = Field(None, description=(
        "From now on, a new champion needs an evaluation whose interval puts it ahead of the current one (default: "
        "as the current deployment says; off for a graph's first)."))
    sequential: bool | None = Field(None, description=(
        "From now on, the evidence is read with an always-valid interval of the difference, so evaluating as often as "
        "you like does not raise the rate at which a challenger no better than the champion is promoted (default: as "
        "the current deployment says; off for a graph's first)."))
    force: bool = Field(False, description="Promote without the evidence `require_evidence` asks for; recorded.")
    traffic: Literal["fixed", "auto"] = Field("fixed", description=(
        "`auto`: each batch's shares follow top-two Thompson sampling over the policies' reply rates."))
    floor: float = Field(0.01, ge=0, le=0.25, description="Every policy's least share.")
    min_sends: int = Field(100, ge=1, le=1_000_000, description=(
        "`auto`: mature sends a policy needs before its share moves from even (1/policies)."))
    auto_promote: bool = Field(False, description="Promote a challenger as soon as an evaluation puts it ahead.")
    webhook_url: WebhookURL | None = Field(None, description=(
        "Receives the graph's events (`GET /graphs/{graph_id}/events`), signed. Absent: the current deployment's "
        "receiver stays; null: none from now on; a new URL gets a new `webhook_secret`, shown once in this answer."))

    @model_validator(mode="after")
    def _shares(self) -> "DeploymentIn":
        if self.traffic == "fixed":
            for index, challenger in enumerate(self.challengers):
                if challenger.share is None:
                    raise ValueError(f"challengers.{index}.share is required with traffic 'fixed'")
                if challenger.share < self.floor:
                    raise ValueError(f"challengers.{index}.share {challenger.share:g} is below the floor {self.floor:g}")
            total = sum(c.share for c in self.challengers)
            if total > 1 + 1e-9:
                raise ValueError(f"the challengers' shares sum to {total:g}, over 1")
            if self.challengers and 1 - total < self.floor - 1e-9:
                raise ValueError(f"the champion's share {1 - total:g} is below the floor {self.floor:g}")
        else:
            if any(c.share is not None for c in self.challengers):
                raise ValueError("with traffic 'auto' the shares are computed: give no challengers.N.share")
            if self.floor * (1 + len(self.challengers)) > 1:
                raise ValueError(f"a floor of {self.floor:g} for {1 + len(self.challengers)} policies sums over 1")
        ids = [self.policy] + [c.policy for c in self.challengers]
        if len(set(ids)) != len(ids):
            raise ValueError("a policy appears twice among the champion and its challengers")
        return self


class Arm(BaseModel):
    policy: str
    share: float | None = Field(description="Its fixed share; null with `auto` traffic (each batch computes them).")


class DeploymentRecord(BaseModel):
    policy: str
    challengers: list[Arm] = Field(default_factory=list)
    deployed_at: datetime
    forced: bool = False
    evaluation: str | None = Field(None, description="The evaluation that justified the promotion, when one was needed.")
    trigger: Literal["request", "auto_promote"] = Field("request", description=(
        "`request`: a PUT of the deployment; `auto_promote`: an evaluation put this champion ahead."))
    rollback: bool = Field(False, description="Its champion had been the graph's champion before.")
    event: str | None = Field(None, description=(
        "The `policy.promoted`, `policy.rolled_back` or `deployment.changed` event announcing it on the graph (`GET "
        "/graphs/{graph_id}/events`); null for a deployment older than the graph's events."))


class DeploymentOut(BaseModel):
    graph_id: str
    policy: str | None = Field(description="The champion drafts on this graph are written with; null: none deployed.")
    share: float | None = Field(description="The champion's share of the prospects (1 without challengers).")
    challengers: list[Arm]
    require_evidence: bool
    sequential: bool = Field(description="The gate reads an always-valid interval of the difference.")
    traffic: Literal["fixed", "auto"]
    floor: float
    min_sends: int
    auto_promote: bool
    deployed_at: datetime | None
    webhook_url: str | None = Field(None, description="The receiver of the graph's events, its query redacted.")
    webhook_secret: str | None = Field(None, description=(
        "Only in the answer of the PUT that set a new `webhook_url`: the secret its webhooks are signed with."))
    history: list[DeploymentRecord] = Field(description="Every deployment of the graph, the current one first.")


class PolicyEvaluation(BaseModel):
    policy: str
    held_out: int = Field(description="Held-out prospects it wrote for.")
    judge: Interval | None = Field(description="The judge's mean score of its emails to the held-out prospects.")
    predicted_reply: Interval | None = Field(description=(
        "The outcome model's predicted positive-reply rate of those emails (replies weighted by the interest scale)."))
    off_policy: OffPolicy = Field(description="Off-policy estimates of its positive-reply rate per send: a reply in a "
                                              "category the interest scale (REPLY_INTEREST) puts above 0.")
    unsubscribes: OffPolicy | None = Field(None, description=(
        "Off-policy estimates of its unsubscribe-and-complaint rate per send: the promotion gate's guardrail."))
    verified_recipients: int = Field(0, description=(
        "Distinct recipients whose verified replies to its sent drafts the off-policy estimate rests on; a promotion "
        "needs PROMOTION_MIN_RECIPIENTS of them (0 in evaluations made before it was counted)."))


class EvaluationResult(BaseModel):
    policies: list[PolicyEvaluation]
    held_out_reason: str | None = None  # why no prospect was held out
    predicted_reply_reason: str | None = Field(None, description=(
        "Why `predicted_reply` is null for every policy (never a zero in its place)."))
