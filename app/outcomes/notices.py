"""Who hears of a reply: the run or the draft batch its email came from, as a `reply.received` event (and its
webhook). Those domains sit above outcomes, so each registers its announcer here when its module is imported
(`app.runs.transitions`, `app.drafts.service`); ingestion calls them in the transaction that stores the reply."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.outcomes.replies import ReplyCategory


@dataclass(frozen=True)
class ReplyNotice:
    tenant: str
    ref: str
    run_id: str
    iteration: int
    draft_batch_id: str | None  # a draft's batch; None for a run's email
    prospect_id: str | None
    category: ReplyCategory
    confidence: float


Announcer = Callable[[AsyncSession, ReplyNotice], Awaitable[None]]
_announcers: list[Announcer] = []


def listen(announcer: Announcer) -> Announcer:
    """Registers an announcer (once, however often its module is imported)."""
    if announcer not in _announcers:
        _announcers.append(announcer)
    return announcer


async def announce(session: AsyncSession, notices: list[ReplyNotice]) -> None:
    for notice in notices:
        for announcer in _announcers:
            await announcer(session, notice)
