"""Every table, imported in one place for Alembic and the metadata tests."""

from app.backends.embedded.models import PolicyCheckpoint
from app.drafts.models import Draft, DraftBatch
from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.kit.db import Base
from app.knowledge_graph.models import Graph, GraphEdge, GraphNode, GraphScenario
from app.learned.models import Deployment, Evaluation, Policy
from app.outcomes.models import EmailRef, OutcomeNonce, OutcomeRecord, OutcomeSource
from app.runs.models import IdempotencyKey, Iteration, NodeScore, NodeScoreChange, Run, TrajectoryRecord, Worker

__all__ = [
    "Base", "Deployment", "Evaluation", "Draft", "DraftBatch", "EmailRef", "Event", "Graph", "GraphEdge", "GraphNode", "GraphScenario", "IdempotencyKey", "Iteration", "NodeScore",
    "NodeScoreChange", "OutcomeNonce", "OutcomeRecord", "OutcomeSource", "Policy", "PolicyCheckpoint", "Run", "TrajectoryRecord", "WebhookAttempt", "WebhookDelivery", "Worker",
]
