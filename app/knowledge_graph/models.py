from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.db import Base, UTCDateTime, utcnow


class Graph(Base):
    __tablename__ = "graphs"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(String(100))  # who uploaded it; None: shared with every tenant (the demo)
    name: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sender: Mapped[dict | None]  # the document's `sender`, if it has one
    offers: Mapped[list | None]  # the document's `offers`, if it has any


class GraphNode(Base):
    __tablename__ = "graph_nodes"
    __table_args__ = (Index("ix_graph_nodes_type", "graph_id", "type", "id"),)

    graph_id: Mapped[str] = mapped_column(ForeignKey("graphs.id", ondelete="CASCADE"), primary_key=True)
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(500))
    text: Mapped[str] = mapped_column(Text)
    tags: Mapped[list]


class GraphEdge(Base):
    __tablename__ = "graph_edges"
    __table_args__ = (
        Index("ix_graph_edges_source", "graph_id", "source"),
        Index("ix_graph_edges_target", "graph_id", "target"),
    )

    graph_id: Mapped[str] = mapped_column(ForeignKey("graphs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    source: Mapped[str] = mapped_column(String(200))
    target: Mapped[str] = mapped_column(String(200))
    relation: Mapped[str] = mapped_column(String(64))


class GraphScenario(Base):
    __tablename__ = "graph_scenarios"

    graph_id: Mapped[str] = mapped_column(ForeignKey("graphs.id", ondelete="CASCADE"), primary_key=True)
    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    position: Mapped[int]
    prospect: Mapped[dict]
    goal: Mapped[str] = mapped_column(Text)
    seed_nodes: Mapped[list]
