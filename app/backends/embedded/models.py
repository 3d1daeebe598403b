from datetime import datetime

from sqlalchemy import LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.db import Base, UTCDateTime, utcnow


class PolicyCheckpoint(Base):
    """An embedded policy's weights at one training step, so any worker can resume its run."""

    __tablename__ = "policy_checkpoints"

    model_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    step: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    metrics: Mapped[dict]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
