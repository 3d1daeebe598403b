"""Outcome rows: written once per event id and tenant, read back per run."""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.outcomes.models import EmailRef, OutcomeRecord
from app.outcomes.schemas import OutcomeType

BATCH_ROWS = 1000  # rows per INSERT: under SQLite's limit of bound parameters


@dataclass(frozen=True)
class Origin:
    run_id: str
    iteration: int
    tenant: str


async def origins(session: AsyncSession, refs: set[str]) -> dict[str, Origin]:
    """Where each known ref was written (any tenant's: the caller filters by its own)."""
    if not refs:
        return {}
    rows = await session.execute(
        select(EmailRef.ref, EmailRef.run_id, EmailRef.iteration, EmailRef.tenant).where(EmailRef.ref.in_(refs))
    )
    return {ref: Origin(run_id, iteration, tenant) for ref, run_id, iteration, tenant in rows}


async def insert_new(session: AsyncSession, rows: list[dict]) -> int:
    """Inserts the rows whose (tenant, event_id) is not stored yet, concurrent inserts included; returns how many."""
    insert = postgresql.insert if session.bind.dialect.name == "postgresql" else sqlite.insert
    inserted = 0
    for start in range(0, len(rows), BATCH_ROWS):
        statement = (insert(OutcomeRecord).values(rows[start:start + BATCH_ROWS])
                     .on_conflict_do_nothing(index_elements=["tenant", "event_id"]).returning(OutcomeRecord.id))
        inserted += len((await session.execute(statement)).all())
    return inserted


async def counts_by_ref(session: AsyncSession, run_id: str) -> list[tuple[str, int, OutcomeType, bool, str | None, int]]:
    """(ref, iteration, type, machine, sentiment, distinct recipients) for every sent email of the run."""
    rows = await session.execute(
        select(OutcomeRecord.ref, OutcomeRecord.iteration, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment,
               func.count(OutcomeRecord.recipient.distinct()))
        .where(OutcomeRecord.run_id == run_id)
        .group_by(OutcomeRecord.ref, OutcomeRecord.iteration, OutcomeRecord.type, OutcomeRecord.machine, OutcomeRecord.sentiment)
    )
    return [tuple(row) for row in rows]


async def recipients_by_ref(session: AsyncSession, run_id: str) -> dict[str, int]:
    """Distinct recipients each email reached in any way (its sends)."""
    rows = await session.execute(
        select(OutcomeRecord.ref, func.count(OutcomeRecord.recipient.distinct()))
        .where(OutcomeRecord.run_id == run_id).group_by(OutcomeRecord.ref)
    )
    return dict(rows.all())


async def judge_scores(session: AsyncSession, refs: set[str]) -> dict[str, float | None]:
    """The run's judge's score of each email, as it was written."""
    if not refs:
        return {}
    return dict((await session.execute(select(EmailRef.ref, EmailRef.judge_score).where(EmailRef.ref.in_(refs)))).all())
