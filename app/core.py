"""What every request needs: settings, the database, the graph cache and the secret box, built once at start-up."""

from dataclasses import dataclass

from app.db import Database
from app.events.signing import SecretBox
from app.knowledge_graph.service import GraphCache
from app.settings import Settings


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    graphs: GraphCache
    secrets: SecretBox  # webhook secrets at rest
