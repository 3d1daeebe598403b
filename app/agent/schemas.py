from pydantic import BaseModel, Field


class Email(BaseModel):
    """What the agent finalizes: every citation is a node id of the run's graph."""

    subject: str
    body: str
    citations: list[str] = Field(default_factory=list)
