"""Outcome rows: written once per event id and tenant, read back per run."""

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.outcomes.models import OutcomeRecord
from app.outcomes.schemas import OutcomeType
from app.runs.models import EmailRef, Iteration, Run, TrajectoryRecord
from app.runs.refs import PUBLISHED

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
        select(EmailRef.ref, EmailRef.run_id, EmailRef.iteration, Run.tenant).join(Run, Run.id == EmailRef.run_id)
        .where(EmailRef.ref.in_(refs))
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


async def judge_scores(session: AsyncSession, run_id: str, refs: set[str]) -> dict[str, float | None]:
    """The judge's score of each email: the published one's from its iteration, a candidate's from its trajectory."""
    found = (await session.execute(
        select(EmailRef.ref, EmailRef.iteration, EmailRef.slot).where(EmailRef.run_id == run_id, EmailRef.ref.in_(refs))
    )).all()
    scores: dict[str, float | None] = {}
    published = {iteration: ref for ref, iteration, slot in found if slot == PUBLISHED}
    if published:
        for iteration, email in await session.execute(
            select(Iteration.iteration, Iteration.email).where(Iteration.run_id == run_id, Iteration.iteration.in_(published))
        ):
            scores[published[iteration]] = (email or {}).get("score")
    candidates = {(iteration, slot): ref for ref, iteration, slot in found if slot != PUBLISHED}
    if candidates:
        for iteration, position, score in await session.execute(
            select(TrajectoryRecord.iteration, TrajectoryRecord.position, TrajectoryRecord.judge_score)
            .where(TrajectoryRecord.run_id == run_id, TrajectoryRecord.iteration.in_({i for i, _ in candidates}))
        ):
            if (iteration, position) in candidates:
                scores[candidates[iteration, position]] = score
    return scores
