"""What a model meant when it answered in text instead of calling a tool.

Models do this (small ones most, hosted ones too): an email written in the message instead of a
`finalize_email` call, or a tool call written as a JSON block. Both are read here, strictly enough
that an echoed prompt or a stray sentence is neither.
"""

import json
import re

from app.agent.schemas import Email
from app.agent.text import words

MIN_BODY_WORDS = 20  # shorter is a sentence about an email, not one
MAX_SUBJECT_WORDS = 15
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.S)
_SUBJECT = re.compile(r"^[\s*_#>]*subject[\s*_]*:[\s*_]*(.+?)[\s*_]*$", re.I | re.M)
_PROMPT_TAGS = re.compile(r"</?(prospect|seller|start_nodes|proven_nodes|exemplar|playbook)>")


def tool_call_from_text(text: str, tool_names: set[str]) -> tuple[str, str] | None:
    """(name, arguments as JSON) of a tool call written as a JSON object, fenced or bare:
    `{"name": …, "arguments": {…}}` (or `"parameters"`), as some chat templates have models write them."""
    for candidate in [*_FENCE.findall(text), text]:
        try:
            data = json.loads(candidate.strip())
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("name") in tool_names:
            arguments = data.get("arguments", data.get("parameters", {}))
            return data["name"], arguments if isinstance(arguments, str) else json.dumps(arguments)
    return None


def email_from_text(text: str, read: dict[str, str]) -> Email | None:
    """An email written as text: a `Subject:` line and the body after it, or else a short first line and a
    body of at least MIN_BODY_WORDS words. It cites the nodes the agent read (`read`: id → title) whose id or
    title it mentions, and no others."""
    text = text.strip()
    if not text or _PROMPT_TAGS.search(text) or text[0] in "{[":
        return None
    if match := _SUBJECT.search(text):
        subject, body = match.group(1).strip(), text[match.end():].strip()
    else:
        first, _, body = text.partition("\n")
        subject, body = first.strip(" *#"), body.strip()
        if words(subject) > MAX_SUBJECT_WORDS:
            return None
    if not subject or words(body) < MIN_BODY_WORDS:
        return None
    lowered = f"{subject}\n{body}".lower()
    cited = [node for node, title in read.items() if node.lower() in lowered or (title and title.lower() in lowered)]
    return Email(subject=subject, body=body, citations=cited)
