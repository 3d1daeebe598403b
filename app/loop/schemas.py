"""Values that flow between the loop's steps (and out through the API)."""

from pydantic import BaseModel, Field


class Email(BaseModel):
    subject: str
    body: str
    citations: list[str] = Field(default_factory=list)


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


class LoopConfig(BaseModel):
    """The knobs of one learning loop, with the contract's defaults and bounds."""

    graph_id: str = "demo"
    scenario_ids: list[str] | None = Field(None, min_length=1, description="Training scenarios; default: all of the graph's.")
    target_scenario_id: str | None = Field(None, description="Scenario whose email is published; default: the first training scenario.")
    iterations: int = Field(3, ge=1, le=200)
    rollouts_per_group: int = Field(4, ge=2, le=64)
    max_turns: int = Field(6, ge=1, le=32)
    learning_rate: float | None = Field(None, gt=0, le=1, description="GRPO learning rate; default: the backend's.")
    feedback_weight: float = Field(0.3, ge=0, le=1)
    top_fraction: float = Field(0.5, gt=0, le=1)
    seed: int = Field(0, ge=-(2**63), le=2**63 - 1)
