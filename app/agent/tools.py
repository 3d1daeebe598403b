"""The agent's tools over a knowledge graph.

Tool results are JSON so that both LLMs and the embedded policy can read them
(see `app.agent.transcript`, which parses a conversation back into structure).
"""

import json

from app.agent.email_checks import draft_feedback
from app.agent.facts import scenario_starts
from app.agent.schemas import Email
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import Scenario

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_connected_nodes",
            "description": "List the nodes connected to a node, best first (highest knowledge-graph score), with type, title and score.",
            "parameters": {
                "type": "object",
                "properties": {"node_id": {"type": "string"}},
                "required": ["node_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_relevant_context",
            "description": "Read a node's facts. Returns its citation id; cite only nodes you have read.",
            "parameters": {
                "type": "object",
                "properties": {"node_id": {"type": "string"}},
                "required": ["node_id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "propose_email",
            "description": "Get feedback on a draft (length, structure, personalisation, call to action). Costs a turn.",
            "parameters": {
                "type": "object",
                "properties": {"subject": {"type": "string"}, "body": {"type": "string"}},
                "required": ["subject", "body"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "finalize_email",
            "description": "Submit the final email with the ids of the nodes whose facts it uses.",
            "parameters": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                    "citations": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["subject", "body", "citations"],
            },
        },
    },
]


def node_summary(graph: KnowledgeGraph, scores: dict[str, float], node_id: str) -> dict:
    node = graph.nodes[node_id]
    return {"id": node.id, "type": node.type, "title": node.title, "score": round(scores[node.id], 4)}


class AgentTools:
    """Executes tool calls for one rollout; bad calls become error results, never exceptions."""

    def __init__(self, graph: KnowledgeGraph, scenario: Scenario, scores: dict[str, float]):
        self.graph = graph
        self.scenario = scenario
        self.scores = scores
        self.final_email: Email | None = None
        self.read: dict[str, str] = {}  # node id: title, of the nodes whose facts the agent read
        self.seen = dict.fromkeys(scenario_starts(graph, scenario))  # the node ids shown to the agent so far, in order
        self.expanded: set[str] = set()  # the nodes whose connections were listed

    def call(self, name: str, arguments: str) -> str:
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return _error(f"malformed arguments for {name}: {exc}")
        handler = {
            "get_connected_nodes": self._connected,
            "get_relevant_context": self._context,
            "propose_email": self._propose,
            "finalize_email": self._finalize,
        }.get(name)
        if handler is None:
            return _error(f"unknown tool {name!r}")
        try:
            return json.dumps(handler(**args))
        except TypeError as exc:
            return _error(f"bad arguments for {name}: {exc}")
        except LookupError as exc:
            return _error(str(exc.args[0]))

    def _node(self, node_id: object):
        if not isinstance(node_id, str) or node_id not in self.graph.nodes:
            raise LookupError(f"unknown node id {node_id!r}")
        return self.graph.nodes[node_id]

    def _connected(self, node_id: str) -> dict:
        node = self._node(node_id)
        neighbors = [
            {**node_summary(self.graph, self.scores, n.id), "relation": n.relation}
            for n in self.graph.neighbors(node.id)
        ]
        neighbors.sort(key=lambda n: (-n["score"], n["id"]))
        self.expanded.add(node.id)
        self.seen.update(dict.fromkeys(n["id"] for n in neighbors))
        return {"node_id": node.id, "neighbors": neighbors}

    def _context(self, node_id: str) -> dict:
        node = self._node(node_id)
        self.read[node.id] = node.title
        return {"citation_id": node.id, "type": node.type, "title": node.title, "facts": node.text, "tags": node.tags}

    def _propose(self, subject: str, body: str) -> dict:
        return {"draft_feedback": draft_feedback(str(subject), str(body), self.scenario.prospect.model_dump())}

    def _finalize(self, subject: str, body: str, citations: list) -> dict:
        if not isinstance(citations, list) or not all(isinstance(c, str) for c in citations):
            raise TypeError("citations must be a list of node ids")
        unknown = [c for c in citations if c not in self.graph.nodes]
        if unknown:
            raise LookupError(f"unknown citation ids {unknown}; cite node ids you have read")
        self.final_email = Email(subject=str(subject), body=str(body), citations=list(dict.fromkeys(citations)))
        return {"status": "final", "citations": self.final_email.citations}

    def email_schema(self) -> dict:
        """The email as JSON, bounded so that a model that repeats itself still closes it within the token limit,
        citing one to MAX_CITATIONS of the nodes the agent read (none when it read none)."""
        cited = ({"type": "array", "items": {"type": "string", "enum": list(self.read)}, "minItems": 1,
                  "maxItems": min(MAX_CITATIONS, len(self.read))} if self.read
                 else {"type": "array", "items": {"type": "string"}, "maxItems": 0})
        return _object(subject={"type": "string", "maxLength": 120}, body={"type": "string", "maxLength": 1500},
                       citations=cited)

    def call_schema(self, turns_after: int) -> dict:
        """One tool call as JSON (`{"name", "arguments"}`, the form `tool_call_from_text` reads), for a server that
        constrains decoding to a schema but not to tools. Only calls that can still help: a node shown to the agent
        and not yet listed or read (a repeat returns what it already has), `finalize_email` once it has read a node,
        a read when only one turn would be left to finalize in, and `finalize_email` alone on the last turn."""
        finalize = _object(name={"const": "finalize_email"}, arguments=self.email_schema())
        if turns_after == 0:
            return finalize
        options = []
        unlisted = [n for n in self.seen if n not in self.expanded]
        if unlisted and (self.read or turns_after > 1):  # nothing read and one turn to spare: only a read
            options.append(_node_call("get_connected_nodes", unlisted))
        if unread := [n for n in self.seen if n not in self.read]:
            options.append(_node_call("get_relevant_context", unread))
        if self.read:
            options.append(finalize)
        return options[0] if len(options) == 1 else {"anyOf": options}


MAX_CITATIONS = 8
TOOL_NAMES = {tool["function"]["name"] for tool in TOOLS}


def _node_call(name: str, node_ids: list[str]) -> dict:
    return _object(name={"const": name}, arguments=_object(node_id={"type": "string", "enum": node_ids}))


def _object(**properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _error(message: str) -> str:
    return json.dumps({"error": message})
