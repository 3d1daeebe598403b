from pydantic import BaseModel, Field


class Email(BaseModel):
    """What the agent finalizes: every citation is a node id of the run's graph."""

    subject: str
    body: str
    citations: list[str] = Field(default_factory=list)


class TracedEmail(Email):
    """An email as the service hands it out: with the ref its outcomes are reported under."""

    ref: str | None = Field(None, description=(
        "Opaque and unique (`eml_…`): send it as `codreamer_ref` in your email provider's custom data, so that "
        "opens, clicks and replies come back to this email. Null on emails written before refs existed."))
    message_id: str | None = Field(None, description=(
        "A suggested RFC 5322 Message-ID: send the email with it and replies thread back to this email."))


class PublishedEmail(TracedEmail):
    """An email a run published (one per iteration), with the run's judge's score of it."""

    score: float | None = Field(
        None, ge=0, le=1, description="The run's judge's score of this email alone, in [0, 1]; null if the judge failed."
    )


class FinalEmail(PublishedEmail):
    """A published email with the iteration that published it (a run's final or best email)."""

    iteration: int = Field(description="The iteration that published it; 0 is the baseline.")


class Exemplar(Email):
    """The best email so far for a scenario, from the run's trajectories: in-context learning shows it to the agent."""

    reward: float = Field(description="Its reward (judge blended with feedback) when it was written.")
    iteration: int = Field(description="The iteration that wrote it.")


class ScenarioContext(BaseModel):
    """What in-context learning carries into a scenario's next prompts."""

    exemplar: Exemplar | None = None
    playbook: list[str] = Field(default_factory=list, description="Lessons from the judge's explanations, newest first.")
