"""Values that flow between the loop's steps (and out through the API)."""

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.kit.settings import BackendName
from app.knowledge_graph.schemas import Sender


class FeedbackMode(StrEnum):
    OUTCOMES = "outcomes"
    SIMULATED = "simulated"
    NONE = "none"
    ORACLE = "oracle"


class FeedbackWait(BaseModel):
    """After publishing an iteration, wait for its emails' outcomes before scoring the next one."""

    model_config = ConfigDict(extra="forbid")

    min_delivered: int = Field(ge=1, le=10_000_000, description="Delivered events of the iteration's emails (published "
                                                                "and candidates, all recipients) to wait for.")
    timeout_s: int = Field(ge=1, le=30 * 86400, description="Go on with what arrived after this long.")


class RunConfig(BaseModel):
    """Every knob of one learning loop, from the request to the workflow's steps.

    A step reads the fields it uses from here, so a new knob is a field, the step that uses
    it, and a line in docs/guide/runs.md.
    """

    # extra="ignore": the stored config also carries the run's webhook_url; allow_inf_nan=False: NaN and
    # Infinity are no learning rate or weight (and PostgreSQL's JSON cannot store them)
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    graph_id: str = Field("demo", max_length=200)
    scenario_ids: list[str] | None = Field(
        None, min_length=1, max_length=10_000, description="Training scenarios; default: all of the graph's."
    )
    target_scenario_id: str | None = Field(
        None, max_length=200, description="Scenario whose email is published; default: the first training scenario."
    )
    iterations: int = Field(3, ge=1, le=200)
    rollouts_per_group: int = Field(4, ge=2, le=64)
    max_turns: int = Field(6, ge=1, le=32)
    learning_rate: float | None = Field(None, gt=0, le=1, description="GRPO learning rate; default: the backend's.")
    feedback_weight: float = Field(0.3, ge=0, le=1, description=(
        "Weight of online feedback in the blended reward. An email's feedback is the population's where there is no "
        "evidence about it, and moves toward its own rates as evidence grows; with no outcomes at all the reward is the judge's."))
    feedback_wait: FeedbackWait | None = Field(None, description=(
        "Pace iterations by outcomes: after publishing an iteration (the baseline too, but not the last), the run waits, "
        "durably and cancellably, until its emails have `min_delivered` delivered events or `timeout_s` passes."))
    simulated_ab: bool = Field(False, description=(
        "On `simulated` feedback: the demo's provider also sends every candidate of the target scenario to 10 look-alikes "
        "each (an A/B test), besides the published email to 50."))
    feedback_source: FeedbackMode | None = Field(None, description=(
        "Where online feedback comes from: `outcomes` (real opens and replies reported for the tenant's emails on this "
        "graph), `simulated` (the demo's simulated provider, which receives each published email), `none` (the judge "
        "alone), or `oracle` (benchmarks only: every candidate rated by the simulator at once). Default: `simulated` on "
        "a graph with simulated prospects (the demo), `outcomes` elsewhere."))
    max_steps_off_policy: int | None = Field(None, ge=0, le=4, description=(
        "Pipelining: how many training steps the policy that samples an iteration's rollouts may lag the step that trains "
        "on them. At 1, iteration n+1's rollouts run (on the policy of step n−1) while step n trains; 0 is strict order. "
        "Default: 1, or 0 for a run paced by `feedback_wait` (which waits for each iteration's outcomes anyway)."))
    max_tokens_per_turn: int = Field(1024, ge=16, le=32_768, description=(
        "The most tokens the policy may write in one turn (`max_tokens`); a turn cut there ends `cut_by_length` if it "
        "was the last."))
    top_fraction: float = Field(0.5, gt=0, le=1, description="Share of each group's citing emails that earn node credit.")
    exploration: float = Field(1.0, ge=0, le=10, description=(
        "Where the run learns from what is sent (`outcomes`, `simulated`): each rollout lists one node within its reach "
        "among its start nodes, the one whose drawn effect on replies under the outcome model is the highest (Thompson "
        "sampling), its KG score times exp(exploration · that draw), at most ×25, so facts no sent email cited yet get "
        "tried; 0 turns it off."))
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
    backend: BackendName | None = Field(None, description="Model backend; default: the MODEL_BACKEND setting.")
    train_options: dict[str, Any] | None = Field(
        None, description="Training options the backend supports (see docs/guide/backends-and-judges.md); unknown ones are a 422.",
        examples=[{"scale_rewards": True, "kl_penalty_coef": 0.1}],
    )
    train_policy: bool = Field(True, description="For experiments: false skips the GRPO update (the policy stays fixed).")
    reweight_graph: bool = Field(True, description="For experiments: false skips KG reweighting (node scores stay 1.0).")
    judge: str | None = Field(
        None, max_length=200, description="One of the judges the operator configured (see GET /judges); "
        "default: the JUDGE_MODEL judge.",
    )
    sender: Sender | None = Field(None, description=(
        "Who signs the run's emails; default: the graph's `sender`, else the SENDER_NAME setting, else the seller's team."))
    in_context: bool | None = Field(
        None, description="In-context learning: each iteration distils the best email so far and a playbook of the judge's "
        "lessons per scenario into the next iteration's prompts. Default: on for backends that cannot train (openai), off otherwise.",
    )


class RewardStats(BaseModel):
    mean: float = 0.0
    median: float = 0.0
    min: float = 0.0
    max: float = 0.0
    std: float = 0.0
    count: int = 0


class TrainingOutcome(BaseModel):
    step: int
    skipped: bool
    reason: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)


class EndReason(StrEnum):
    """How a rollout ended."""

    FINALIZED = "finalized"  # a finalize_email call
    PARSED_FROM_TEXT = "parsed_from_text"  # an email written in the message, read as the final one
    STRUCTURED = "structured"  # after a last turn in text, the email asked for as JSON under a schema
    OUT_OF_TURNS = "out_of_turns"
    CUT_BY_LENGTH = "cut_by_length"  # out of turns, the last answer cut at the token limit
    CONTEXT_FULL = "context_full"  # the conversation outgrew the model's context window
