"""Ends the sleep of this worker's runs that wait for outcomes as soon as new ones are stored.

Ingestion (`app.outcomes`) only stores outcomes: it knows no run's workflow. The worker, which executes the waiting runs,
looks for their new delivered outcomes every LOOK_S while any of them waits, and sends the run's workflow a message
(DBOS) when the count grew; the workflow, asleep in a receive, then checks. A message sent while the workflow is not in
its receive waits for it.
"""

import asyncio
import contextlib
import contextvars
import logging
from dataclasses import dataclass

from dbos import DBOS

from app.kit.db import Database
from app.outcomes import repository as outcome_repository

LOOK_S = 1.0  # how late a waiting run hears of its outcomes, at most (and one query a second while any run waits)
OUTCOMES_TOPIC = "outcomes"  # what a waiting run receives when outcomes arrive

log = logging.getLogger(__name__)


@dataclass
class _Waiter:
    workflow_id: str
    iteration: int
    delivered: int  # what the run has seen (or been told of)


class OutcomeWatch:
    def __init__(self, db: Database):
        self.db = db
        self._waiters: dict[str, _Waiter] = {}
        self._looking: asyncio.Task | None = None

    def watch(self, run_id: str, workflow_id: str, iteration: int, delivered: int) -> None:
        """Until `unwatch`: wakes the workflow once more than `delivered` outcomes of the iteration are stored."""
        known = self._waiters.get(run_id)
        if known is not None and known.iteration == iteration:
            delivered = max(delivered, known.delivered)  # a wake already sent is not sent again
        self._waiters[run_id] = _Waiter(workflow_id, iteration, delivered)
        if self._looking is None or self._looking.done():
            # a context of its own: in the workflow's, DBOS would record each send as a step of that workflow
            self._looking = asyncio.create_task(self._look_while_waited(), name="outcome-watch",
                                                context=contextvars.Context())

    def unwatch(self, run_id: str) -> None:
        self._waiters.pop(run_id, None)

    async def look(self) -> None:
        waiters = dict(self._waiters)
        async with self.db.read() as session:
            counts = await outcome_repository.delivered(session, {run_id: w.iteration for run_id, w in waiters.items()})
        for run_id, waiter in waiters.items():
            if counts.get(run_id, 0) > waiter.delivered:
                await DBOS.send_async(waiter.workflow_id, "arrived", topic=OUTCOMES_TOPIC)
                waiter.delivered = counts[run_id]  # once sent: a send that failed is tried again at the next look

    async def _look_while_waited(self) -> None:
        while self._waiters:
            await asyncio.sleep(LOOK_S)
            try:
                await self.look()
            except Exception as exc:  # a database outage: the next look tries again, and the run also looks itself
                log.warning("looking for waiting runs' outcomes failed: %s", type(exc).__name__)

    async def close(self) -> None:
        if self._looking is not None:
            self._looking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._looking
