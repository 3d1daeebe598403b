"""Embedded policy checkpoints in the database, so a run can resume on any worker."""

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.embedded.models import PolicyCheckpoint
from app.kit.db import Database


class DatabaseCheckpoints:
    def __init__(self, db: Database):
        self.db = db

    async def load(self, model_name: str) -> dict[int, bytes]:
        async with self.db.transaction() as session:
            rows = await session.execute(
                select(PolicyCheckpoint.step, PolicyCheckpoint.data).where(PolicyCheckpoint.model_name == model_name)
            )
            return dict(rows.tuples().all())

    async def save(self, model_name: str, step: int, data: bytes, metrics: dict[str, float]) -> None:
        async with self.db.transaction() as session:
            await session.merge(PolicyCheckpoint(model_name=model_name, step=step, data=data, metrics=metrics))

    async def delete(self, model_name: str, steps: list[int]) -> None:
        async with self.db.transaction() as session:
            await session.execute(
                delete(PolicyCheckpoint).where(PolicyCheckpoint.model_name == model_name, PolicyCheckpoint.step.in_(steps))
            )


async def delete_model_checkpoints(session: AsyncSession, model_name: str) -> None:
    """Every checkpoint of a model, in the caller's transaction (a deleted run's policy)."""
    await session.execute(delete(PolicyCheckpoint).where(PolicyCheckpoint.model_name == model_name))


async def copy_checkpoint(session: AsyncSession, source: str, step: int, target: str, target_step: int) -> bool:
    """A model's checkpoint at `step` as another model's `target_step` (a kept policy's own copy, or a run that
    continues a policy from its step 0), in the caller's transaction; False when the source step is not stored."""
    row = await session.get(PolicyCheckpoint, (source, step))
    if row is None:
        return False
    session.add(PolicyCheckpoint(model_name=target, step=target_step, data=row.data, metrics={}))
    return True
