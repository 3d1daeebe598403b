"""What every request needs: settings, the database and the graph cache, built once at start-up."""

from dataclasses import dataclass

from app.db import Database
from app.knowledge_graph.service import GraphCache
from app.settings import Settings


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    graphs: GraphCache
