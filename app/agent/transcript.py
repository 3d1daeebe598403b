"""Reads an agent conversation (OpenAI chat messages) back into structure.

The embedded policy decides from it, the embedded judge grades from it, and training
rebuilds each decision's context from it: all three see only what is in the messages.
"""

import json
import re
from dataclasses import dataclass, field

from app.agent.schemas import Email

_TAG = re.compile(r"<(prospect|seller|sender|start_nodes|proven_nodes|exemplar|playbook)>(.*?)</\1>", re.S)
_BUDGET = re.compile(r"Turn budget: (\d+)")
_GOAL = re.compile(r"^Goal: (.*)$", re.M)


@dataclass
class SeenNode:
    id: str
    type: str = ""
    title: str = ""
    score: float = 1.0
    facts: str | None = None
    tags: tuple[str, ...] = ()
    seed: bool = False  # listed in the prompt: a start node, or one that worked before (proven)
    proven: bool = False
    browsed: bool = False
    exemplar: bool = False  # cited by the best email so far for this prospect (in-context learning)

    @property
    def read(self) -> bool:
        return self.facts is not None


@dataclass
class Transcript:
    prospect: dict = field(default_factory=dict)
    goal: str = ""  # the scenario's goal, from the user prompt's "Goal: ..." line
    seller: dict = field(default_factory=dict)  # who the email is from: {"id", "name", "about"} (empty: not said)
    sender: dict = field(default_factory=dict)  # who signs it: {"name", "title"?, "signature"?} (empty: the seller's team)
    turn_budget: int = 6
    nodes: dict[str, SeenNode] = field(default_factory=dict)
    exemplar: Email | None = None  # in-context learning: the best email so far for this prospect
    playbook: list[str] = field(default_factory=list)  # and the judge's lessons
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    proposals: int = 0
    final_email: Email | None = None

    @property
    def read_nodes(self) -> list[SeenNode]:
        return [n for n in self.nodes.values() if n.read]


def _content(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _see(transcript: Transcript, summary: dict, **flags) -> SeenNode:
    node = transcript.nodes.get(summary["id"]) or SeenNode(id=summary["id"])
    node.type = summary.get("type", node.type)
    node.title = summary.get("title", node.title)
    if isinstance(summary.get("score"), (int, float)):
        node.score = float(summary["score"])
    for key, value in flags.items():
        setattr(node, key, value)
    transcript.nodes[node.id] = node
    return node


def parse_transcript(messages: list[dict]) -> Transcript:
    t = Transcript()
    calls: dict[str, tuple[str, dict]] = {}
    for message in messages:
        role = message.get("role")
        text = _content(message)
        if role == "system" and (m := _BUDGET.search(text)):
            t.turn_budget = int(m.group(1))
        elif role == "user":
            if m := _GOAL.search(text):
                t.goal = m.group(1).strip()
            for tag, body in _TAG.findall(text):
                data = _json(body)
                if tag == "prospect" and isinstance(data, dict):
                    t.prospect = data
                elif tag == "sender" and isinstance(data, dict):
                    t.sender = {key: str(data[key]) for key in ("name", "title", "signature") if data.get(key)}
                elif tag == "seller" and isinstance(data, dict):
                    t.seller = {key: str(data.get(key) or "") for key in ("id", "name", "about")}
                elif tag in ("start_nodes", "proven_nodes") and isinstance(data, list):
                    for summary in data:
                        if isinstance(summary, dict) and "id" in summary:
                            _see(t, summary, seed=True, **({"proven": True} if tag == "proven_nodes" else {}))
                elif tag == "exemplar" and isinstance(data, dict):
                    t.exemplar = Email(subject=str(data.get("subject", "")), body=str(data.get("body", "")),
                                       citations=[str(c) for c in data.get("citations") or []])
                    for node_id in t.exemplar.citations:  # what the best email cited: somewhere to start
                        _see(t, {"id": node_id}, seed=True, exemplar=True)
                elif tag == "playbook" and isinstance(data, list):
                    t.playbook = [str(lesson) for lesson in data]
        elif role == "assistant":
            t.turns += 1
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments = _json(function.get("arguments") or "{}")
                calls[call.get("id", "")] = (function.get("name", ""), arguments if isinstance(arguments, dict) else {})
                t.tool_calls += 1
        elif role == "tool":
            name, args = calls.get(message.get("tool_call_id", ""), ("", {}))
            _apply_result(t, name, args, _json(text))
    return t


def _apply_result(t: Transcript, name: str, args: dict, result) -> None:
    if not isinstance(result, dict) or "error" in result:
        t.tool_errors += 1
        return
    if name == "get_connected_nodes":
        _see(t, {"id": result["node_id"]}, browsed=True)
        for summary in result.get("neighbors", []):
            _see(t, summary)
    elif name == "get_relevant_context":
        _see(t, {"id": result["citation_id"], "type": result.get("type", ""), "title": result.get("title", "")},
             facts=str(result.get("facts", "")), tags=tuple(result.get("tags", [])))
    elif name == "propose_email":
        t.proposals += 1
    elif name == "finalize_email":
        t.final_email = Email(
            subject=str(args.get("subject", "")), body=str(args.get("body", "")), citations=list(result.get("citations", []))
        )
