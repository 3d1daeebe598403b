"""A rollout as ART trains on it. Apart from the loop's other types, so that what imports those (the API's schemas,
the command line's checks) does not pay for importing ART and the litellm it imports: 4.6 CPU-seconds a process."""

import art
from openai.types.chat.chat_completion import Choice

from app.agent.schemas import Email
from app.loop.schemas import EndReason


class EmailTrajectory(art.Trajectory):
    """A rollout for one scenario, with the email it finalized (None when it wrote none)."""

    scenario_id: str = ""
    rollout: int = 0
    turns: int = 0
    email: Email | None = None
    end_reason: EndReason | None = None  # None: written before end reasons were recorded
    corrections: int = 0  # turns answered in text that were told to use the tools
    json_turns: int = 0  # turns that asked for a tool call as JSON under a schema, after a turn in text

    def to_json(self) -> dict:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict) -> "EmailTrajectory":
        """Assistant turns come back as dicts after JSON; training needs them as Choices again."""
        items = [
            Choice.model_validate(item) if "message" in item and "finish_reason" in item else item
            for item in data["messages_and_choices"]
        ]
        return cls.model_validate(data | {"messages_and_choices": items})
