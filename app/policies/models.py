from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class Deployment(Base):
    """One promotion of a policy on a graph; the graph's latest is its current deployment, the others its history.

    Not tied to the run by a foreign key: the history outlives runs deleted since; the current deployment's run cannot
    be deleted (the runs domain asks `deployed_graph`)."""

    __tablename__ = "deployments"
    __table_args__ = (Index("ix_deployments_graph", "graph_id", "id"), Index("ix_deployments_run", "run_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    graph_id: Mapped[str] = mapped_column(String(200), ForeignKey("graphs.id", ondelete="CASCADE"))
    tenant: Mapped[str] = mapped_column(String(100))
    run_id: Mapped[str] = mapped_column(String(40))
    iteration: Mapped[int]
    deployed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
