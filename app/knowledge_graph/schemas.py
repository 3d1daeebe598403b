"""The graph document format of the contract, validated so that errors name the culprit."""

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.kit.pages import Page

NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL characters
Id = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")]
ShortText = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=NO_NUL)]
Label = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=NO_NUL)]
LongText = Annotated[str, StringConstraints(min_length=1, max_length=5000, pattern=NO_NUL)]


def _not_a_path_step(value: str) -> str:
    """`.` and `..` are the current and the parent folder in a URL: /graphs/.. is no graph's address."""
    if set(value) == {"."}:
        raise ValueError(f"graph id {value!r} is only dots: it would not survive in a URL path")
    return value


GraphId = Annotated[Id, AfterValidator(_not_a_path_step)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Node(Strict):
    id: Id
    type: Label
    title: ShortText
    text: LongText
    tags: list[Label] = Field(default_factory=list, max_length=32)


class Edge(Strict):
    source: Id
    target: Id
    relation: Label


class Prospect(Strict):
    name: ShortText
    role: ShortText
    company: ShortText
    industry: ShortText
    pains: list[ShortText] = Field(default_factory=list, max_length=16)
    first_name: ShortText | None = Field(None, description="The name to greet by, when `name` alone would not say it.")
    custom: dict[ShortText, LongText] = Field(default_factory=dict, max_length=50, description=(
        "Anything else known about the prospect (its stack, say): the agent reads it, and facts may answer it."))


class Sender(Strict):
    """Who signs the emails: a person's name, and optionally their title and a signature block (which replaces the
    name and title lines under the sign-off when given)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=120, pattern=NO_NUL)]
    title: Annotated[str, StringConstraints(min_length=1, max_length=120, pattern=NO_NUL)] | None = None
    signature: Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=NO_NUL)] | None = None


class Offer(Strict):
    """What an email asks a persona for, when the prospect has no goal of its own: for the roles named (a prospect's
    role matches when it holds every word of one of them, "VP Engineering" matching "VP of Engineering, Platform"),
    or for the persona node's title; with neither, the graph's offer for anyone."""

    ask: LongText
    roles: list[ShortText] = Field(default_factory=list, max_length=64)
    persona: Id | None = Field(None, description="A persona node: its title is one more role the offer is for.")


class Scenario(Strict):
    id: Id
    prospect: Prospect
    goal: LongText
    seed_nodes: list[Id] = Field(min_length=1, max_length=32)


EXAMPLE = {
    "id": "acme", "name": "Acme facts",
    "nodes": [
        {"id": "product-uptime", "type": "product", "title": "Uptime Guard", "text": "Monitors every pipeline.", "tags": ["uptime"]},
        {"id": "case-northwind", "type": "case_study", "title": "Northwind Bank",
         "text": "Cut incident time by 43% in six months.", "tags": ["banking", "incidents"]},
    ],
    "edges": [{"source": "product-uptime", "target": "case-northwind", "relation": "proves"}],
    "scenarios": [{"id": "bank-cto", "goal": "Book a 30-minute call.", "seed_nodes": ["product-uptime"],
                   "prospect": {"name": "Dana Li", "role": "CTO", "company": "Fjord Bank", "industry": "banking",
                                "pains": ["slow incident response"]}}],
}


class GraphDocument(Strict):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, json_schema_extra={"examples": [EXAMPLE]})

    id: GraphId
    name: ShortText
    nodes: list[Node] = Field(min_length=1)
    edges: list[Edge] = Field(default_factory=list)
    scenarios: list[Scenario] = Field(min_length=1)
    sender: Sender | None = Field(None, description="Who signs the emails written on this graph, unless a batch or a "
                                                    "run names its own.")
    offers: list[Offer] = Field(default_factory=list, max_length=256, description=(
        "What emails ask for, by persona or role, for prospects with no goal of their own."))

    @model_validator(mode="after")
    def _references_resolve(self) -> "GraphDocument":
        node_ids: set[str] = set()
        for node in self.nodes:
            if node.id in node_ids:
                raise ValueError(f"duplicate node id {node.id!r}")
            node_ids.add(node.id)
        seen_edges: set[tuple[str, str, str]] = set()
        for index, edge in enumerate(self.edges):
            for end in ("source", "target"):
                if getattr(edge, end) not in node_ids:
                    raise ValueError(f"edges[{index}].{end} names unknown node {getattr(edge, end)!r}")
            key = (edge.source, edge.target, edge.relation)
            if key in seen_edges:
                raise ValueError(f"edges[{index}] duplicates {edge.source!r} -{edge.relation}-> {edge.target!r}")
            seen_edges.add(key)
        scenario_ids: set[str] = set()
        for scenario in self.scenarios:
            if scenario.id in scenario_ids:
                raise ValueError(f"duplicate scenario id {scenario.id!r}")
            scenario_ids.add(scenario.id)
            for seed in scenario.seed_nodes:
                if seed not in node_ids:
                    raise ValueError(f"scenario {scenario.id!r} seed node {seed!r} is not a node of the graph")
        for index, offer in enumerate(self.offers):
            if offer.persona is not None and offer.persona not in node_ids:
                raise ValueError(f"offers[{index}].persona {offer.persona!r} is not a node of the graph")
        return self


class GraphSummary(BaseModel):
    """A graph as `GET /graphs` lists it, and as an upload or replacement answers."""

    id: str
    name: str
    nodes: int
    edges: int
    scenarios: int

    @classmethod
    def of(cls, document: GraphDocument) -> "GraphSummary":
        return cls(id=document.id, name=document.name, nodes=len(document.nodes), edges=len(document.edges),
                   scenarios=len(document.scenarios))


class GraphReplaced(GraphSummary):
    """A replacement's answer: the summary, and what the change affects."""

    affects: list[str] = Field(default_factory=list, description=(
        "Each deployed policy (champion or challenger) trained on scenarios the new document no longer has, and what "
        "that means for drafting with it."))


class GraphList(Page[GraphSummary]):
    """The graphs the tenant may use: its own and the shared ones."""


class NodePage(Page[Node]):
    """A graph's nodes by id, a page at a time."""


class ScenarioList(Page[Scenario]):
    """A graph's scenarios in upload order."""


class Neighbor(BaseModel):
    id: str
    relation: str
    direction: str


class NodeDetail(Node):
    neighbors: list[Neighbor]
