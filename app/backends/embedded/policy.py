"""A log-linear stochastic policy over the agent's decisions, and its GRPO update.

Every decision is a softmax over options whose logits are `features @ weights[block]`:
which action to take, which node to browse or read, whether to cite each read node, and the
email's tone, length and call to action. The features come only from the conversation
(prospect, node titles, facts and KG scores), never from graph ids or words known in advance.
A sampled decision is reported as one "token" with its logprob, so a trajectory's Choices
carry everything GRPO needs to recompute importance ratios.
"""

import io
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from app.agent.facts import is_context, is_pricing
from app.agent.text import terms
from app.agent.transcript import SeenNode, Transcript
from app.backends.embedded.composer import CTAS, LENGTHS, TONES, Seller, angle_of, compose, compose_email, quotable

DEFAULT_LEARNING_RATE = 0.05  # the step of GRPO's update of this policy, unless a run sets its own
ACTIONS = ("get_connected_nodes", "get_relevant_context", "propose_email", "finalize_email")
TYPE_BUCKETS, ID_BUCKETS, SCENARIO_BUCKETS = 8, 32, 32
NODE_BASE = 10  # the node features before the type and id buckets
NODE_DIM = NODE_BASE + TYPE_BUCKETS + ID_BUCKETS
STATE_DIM = 10
SCENARIO_DIM = 1 + SCENARIO_BUCKETS
LOG_SCORE = 1  # index of log(KG score) in node features
IN_EXEMPLAR = 8  # index of "the best email so far cited it" in node features
PROVEN = 9  # index of log(KG score) for a node the prompt lists as having worked before, else 0
ANGLES = {"tone": TONES, "length": LENGTHS, "cta": CTAS}
BLOCKS = {
    "action": len(ACTIONS) * STATE_DIM,
    "browse": NODE_DIM,
    "read": NODE_DIM,
    "cite": NODE_DIM,
    # per option, the scenario's features; then one shared weight on "the best email so far chose it"
    **{block: len(options) * SCENARIO_DIM + 1 for block, options in ANGLES.items()},
}
# How strongly an untrained agent keeps what the best email so far did, as its prompt asks: as much as
# it prefers a node at the KG score cap (5) over an unscored one, in every node and angle decision.
EXEMPLAR_PRIOR = math.log(5.0)


def _bucket(text: str, buckets: int) -> int:
    return zlib.crc32(text.encode()) % buckets


@dataclass
class Checkpoint:
    """Weights plus Adam moments, so training resumes exactly from any saved step."""

    weights: dict[str, np.ndarray]
    m: dict[str, np.ndarray] = field(default_factory=dict)
    v: dict[str, np.ndarray] = field(default_factory=dict)
    updates: int = 0

    @classmethod
    def initial(cls) -> "Checkpoint":
        weights = {block: np.zeros(dim) for block, dim in BLOCKS.items()}
        # An untrained agent is still a sensible one: it prefers what the tools list first (the
        # highest KG score), reads before it writes, finishes after a few reads, cites what it read,
        # and weighs a node's KG score the same way in all three node decisions.
        weights["browse"][LOG_SCORE] = weights["read"][LOG_SCORE] = 1.0
        action = weights["action"].reshape(len(ACTIONS), STATE_DIM)
        action[ACTIONS.index("get_relevant_context"), 0] = 0.5
        action[ACTIONS.index("propose_email"), 0] = -0.5
        # Finalizing before anything was read writes an email with no fact to cite: all but ruled out.
        action[ACTIONS.index("finalize_email"), [0, 2 + 0, 2 + 3, 2 + 4]] = (-0.5, -3.0, 1.5, 2.0)
        weights["cite"][0] = 0.5
        weights["cite"][LOG_SCORE] = 1.0  # cites what worked before for this prospect, as it browses and reads it first
        for block in ("browse", "read", "cite"):
            weights[block][IN_EXEMPLAR] = EXEMPLAR_PRIOR
        for block in ANGLES:
            weights[block][-1] = EXEMPLAR_PRIOR
        # The prompt advertises the nodes that worked before (score above 1) a second time, best first,
        # so an untrained agent that follows its prompt weighs that evidence twice when it reads and
        # cites: a node listed on thin evidence gains little, one at the cap as much as the exemplar's.
        weights["read"][PROVEN] = weights["cite"][PROVEN] = 1.0
        return cls(weights)

    def to_bytes(self) -> bytes:
        arrays = {f"w.{k}": a for k, a in self.weights.items()}
        arrays |= {f"m.{k}": a for k, a in self.m.items()} | {f"v.{k}": a for k, a in self.v.items()}
        buffer = io.BytesIO()
        np.savez(buffer, updates=np.array(self.updates), **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Checkpoint":
        with np.load(io.BytesIO(data)) as npz:
            parts: dict[str, dict[str, np.ndarray]] = {"w": {}, "m": {}, "v": {}}
            for key in npz.files:
                if key != "updates":
                    kind, block = key.split(".", 1)
                    parts[kind][block] = npz[key]
            layout = {block: weights.size for block, weights in parts["w"].items()}
            if layout != BLOCKS:
                raise ValueError("the checkpoint was written by a version of the embedded policy with other features; "
                                 "a run started before that upgrade cannot go on: start a new one")
            return cls(parts["w"], parts["m"], parts["v"], int(npz["updates"]))


# ---------------------------------------------------------------- features


class ProspectView:
    """The prospect's vocabulary, for relevance features."""

    def __init__(self, prospect: dict):
        self.prospect = prospect
        self.pains = [terms(str(p)) for p in prospect.get("pains") or []]
        self.role = terms(str(prospect.get("role", "")))
        self.industry = terms(str(prospect.get("industry", "")))
        words = self.role | self.industry | terms(str(prospect.get("company", ""))).union(*self.pains)
        self.features = np.zeros(SCENARIO_DIM)
        self.features[0] = 1.0
        for word in words:
            self.features[1 + _bucket(word, SCENARIO_BUCKETS)] = 1.0 / math.sqrt(max(1, len(words)))

    def relevance(self, node: SeenNode) -> tuple[float, float, float]:
        words = terms(f"{node.type} {node.title} {node.facts or ''} {' '.join(node.tags)}")
        pains = sum(bool(p & words) for p in self.pains) / max(1, len(self.pains))
        return pains, float(bool(self.role & words)), float(bool(self.industry & words))


def node_features(node: SeenNode, view: ProspectView) -> np.ndarray:
    pains, role, industry = view.relevance(node)
    x = np.zeros(NODE_DIM)
    x[:NODE_BASE] = (1.0, math.log(max(node.score, 1e-3)), pains, role, industry, node.read, node.seed, node.browsed,
                     node.exemplar, math.log(max(node.score, 1e-3)) if node.proven else 0.0)
    x[NODE_BASE + _bucket(node.type, TYPE_BUCKETS)] = 1.0
    x[NODE_BASE + TYPE_BUCKETS + _bucket(node.id, ID_BUCKETS)] = 1.0
    return x


def state_features(t: Transcript, view: ProspectView) -> np.ndarray:
    read = t.read_nodes
    unread = [n for n in t.nodes.values() if not n.read]
    best_unread = max((view.relevance(n)[0] for n in unread), default=0.0)
    s = np.zeros(STATE_DIM)
    s[0] = 1.0
    s[1] = t.turns / max(1, t.turn_budget)
    s[2 + min(len(read), 4)] = 1.0
    s[7] = best_unread
    s[8] = float(t.proposals > 0)
    s[9] = float(t.tool_errors > 0)
    return s


def _options(context: np.ndarray, n_options: int, allowed: list[int]) -> np.ndarray:
    """Rows `one_hot(option) ⊗ context` for the allowed options of a per-option weight block."""
    rows = np.zeros((len(allowed), n_options * context.size))
    for row, option in enumerate(allowed):
        rows[row, option * context.size : (option + 1) * context.size] = context
    return rows


# ---------------------------------------------------------------- decisions


@dataclass
class Decision:
    block: str
    features: np.ndarray  # (options, block dim)
    chosen: int
    label: str
    logprob: float = 0.0


Chooser = Callable[[str, np.ndarray, list[str]], int]


def plan_turn(t: Transcript, choose: Chooser) -> tuple[dict, list[Decision]]:
    """One assistant turn: the tool call to make and the decisions that led to it."""
    view = ProspectView(t.prospect)
    decisions: list[Decision] = []

    def pick(block: str, features: np.ndarray, labels: list[str]) -> int:
        index = choose(block, features, labels)
        decisions.append(Decision(block, features, index, labels[index]))
        return index

    unbrowsed = [n for n in t.nodes.values() if not n.browsed]
    unread = [n for n in t.nodes.values() if not n.read]
    if t.turns + 1 >= t.turn_budget:
        allowed = [3]
    else:
        allowed = [a for a, ok in enumerate((bool(unbrowsed), bool(unread), bool(t.read_nodes), True)) if ok]
    action = allowed[
        pick("action", _options(state_features(t, view), len(ACTIONS), allowed), [f"act={ACTIONS[a]}" for a in allowed])
    ]
    name = ACTIONS[action]
    if name in ("get_connected_nodes", "get_relevant_context"):
        candidates = unbrowsed if name == "get_connected_nodes" else unread
        block = "browse" if name == "get_connected_nodes" else "read"
        features = np.stack([node_features(n, view) for n in candidates])
        node = candidates[pick(block, features, [f"node={n.id}" for n in candidates])]
        return {"name": name, "arguments": {"node_id": node.id}}, decisions
    if name == "propose_email":  # a draft from everything read so far, in a neutral angle
        subject, body = compose(t.prospect, t.read_nodes, "friendly", "medium", "meeting", goal=t.goal,
                                seller=Seller.of(t.seller), sender=t.sender)
        return {"name": name, "arguments": {"subject": subject, "body": body}}, decisions
    cited = []
    for node in t.read_nodes:
        features = np.stack([np.zeros(NODE_DIM), node_features(node, view)])
        if pick("cite", features, [f"cite={node.id}:0", f"cite={node.id}:1"]) == 1:
            cited.append(node)
    answering = [n for n in quotable(t.prospect, t.read_nodes) if n not in cited and not is_pricing(n.type)]
    if not quotable(t.prospect, cited) and (answering or not cited) and t.read_nodes:
        # an email written after reading facts cites the one it prefers most of those that answer a pain (beside a
        # price, something worth paying for), or of all it read when none does
        options = answering or t.read_nodes
        features = np.stack([node_features(n, view) for n in options])
        cited.append(options[pick("cite", features, [f"cite_one={n.id}" for n in options])])
    kept = angle_of(t.exemplar.body, t.prospect, t.goal) if t.exemplar else {}
    angle = {}
    for block, options in ANGLES.items():
        features = np.column_stack([_options(view.features, len(options), list(range(len(options)))),
                                    [float(o == kept.get(block)) for o in options]])
        angle[block] = options[pick(block, features, [f"{block}={o}" for o in options])]
    composed = compose_email(t.prospect, cited, angle["tone"], angle["length"], angle["cta"], goal=t.goal,
                             seller=Seller.of(t.seller), sender=t.sender)
    # It cites what it quotes: a fact that answers none of the pains is left out of the email, and so of its citations
    # (the company it names, a context node, stays cited when the email names it).
    body = composed.body
    citations = [n.id for n in cited if n.id in composed.quoted or (is_context(n.type) and n.title.lower() in body.lower())]
    return {"name": name, "arguments": {"subject": composed.subject, "body": body, "citations": citations}}, decisions


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def sampler(weights: dict[str, np.ndarray], rng: np.random.Generator | None) -> Chooser:
    """Samples each decision (or takes the most likely one when `rng` is None)."""

    def choose(block: str, features: np.ndarray, labels: list[str]) -> int:
        logp = _log_softmax(features @ weights[block])
        if rng is None:
            return int(np.argmax(logp))
        return int(rng.choice(len(logp), p=np.exp(logp)))

    return choose


def replayer(labels_taken: list[str]) -> Chooser:
    """Re-walks recorded decisions so their features can be rebuilt for training."""
    remaining = iter(labels_taken)

    def choose(block: str, features: np.ndarray, labels: list[str]) -> int:
        label = next(remaining)
        try:
            return labels.index(label)
        except ValueError:
            raise ValueError(f"recorded decision {label!r} is not among the options {labels}") from None

    return choose


def logprob_and_grad(weights: dict[str, np.ndarray], decision: Decision) -> tuple[float, np.ndarray]:
    logp = _log_softmax(decision.features @ weights[decision.block])
    grad = decision.features[decision.chosen] - np.exp(logp) @ decision.features
    return float(logp[decision.chosen]), grad


def score_decisions(weights: dict[str, np.ndarray], decisions: list[Decision]) -> list[Decision]:
    for decision in decisions:
        decision.logprob = float(_log_softmax(decision.features @ weights[decision.block])[decision.chosen])
    return decisions
