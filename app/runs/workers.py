"""A worker's housekeeping, so that every run ends: heartbeats, dead-worker takeover, reconciliation.

Without DBOS Conductor nothing notices a worker that died and never came back: its runs stay
PENDING under its executor id and keep their queue slots. Every worker therefore records a
heartbeat; a live worker that finds a heartbeat older than `WORKER_TIMEOUT_S` claims that
worker (one claimant wins) and asks DBOS to recover its pending workflows, which re-enqueues
them for any live worker. Reconciliation ends the runs whose workflow ended without saying so
(a workflow in ERROR, say after the database went away while it recorded a failure), and those whose
workflow stopped executing here without an outcome (DBOS could not record one: a full disk). A draft batch's, chunk's
or evaluation's workflow claimed here and never started is resumed.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path

from dbos import DBOS
from sqlalchemy import delete, select

from app import tasks
from app.backends.specs import delete_local_files, model_name
from app.kit import durable
from app.kit.db import Database, utcnow
from app.kit.settings import Settings
from app.runs import queue, transitions
from app.runs.models import Run, Worker
from app.runs.status import RunStatus

log = logging.getLogger("codreamer")
DRAFTING = (tasks.DRAFT_BATCH, tasks.DRAFT_CHUNK, tasks.EVALUATION)


class Housekeeper:
    def __init__(self, db: Database, settings: Settings, rounds: Sequence[Callable[[], Awaitable]] = ()):
        """`rounds`: more reconciliations each round runs (those of domains above runs: batches, evaluations)."""
        self.db = db
        self.settings = settings
        self.rounds = rounds
        self.executor_id = settings.executor_id
        self._stopping = asyncio.Event()
        self._stalled: dict[str, float] = {}  # our PENDING workflows not executing here, since when
        self._stalled_drafting: dict[str, float] = {}  # the same, of batches, their chunks and evaluations

    def stop(self) -> None:
        """`run_forever` returns after the round in progress, if any: a round is never cut off mid-transaction."""
        self._stopping.set()

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.beat()
                await self.take_over_dead_workers()
                await self.reconcile()
                await self.restart_stalled_drafting()
                for reconcile in self.rounds:
                    await reconcile()
                await self.remove_deleted_runs_files()
            except Exception as exc:  # a database outage: the next round tries again
                log.warning("worker housekeeping skipped a round: %s", type(exc).__name__)
            try:
                await asyncio.wait_for(self._stopping.wait(), self.settings.worker_heartbeat_s)
            except TimeoutError:
                pass

    async def beat(self) -> None:
        async with self.db.transaction() as session:
            await session.merge(Worker(executor_id=self.executor_id, heartbeat_at=utcnow()))

    async def remove_deleted_runs_files(self) -> list[str]:
        """ART's folders on this machine (with their logged conversations) of runs deleted since: `DELETE /runs/{id}`
        removes the API process's own, but in a split deployment the conversations were written on a worker's disk."""
        models = Path(self.settings.art_path) / self.settings.art_project / "models"
        prefix = model_name(self.settings, "")  # every run's model name starts with it
        found = await asyncio.to_thread(
            lambda: [p.name for p in models.iterdir() if p.name.startswith(prefix)] if models.is_dir() else [])
        if not found:
            return []
        run_ids = {name[len(prefix):]: name for name in found}
        async with self.db.read() as session:
            kept = set((await session.scalars(select(Run.id).where(Run.id.in_(run_ids)))).all())
        gone = [name for run_id, name in run_ids.items() if run_id not in kept]
        for name in gone:
            await asyncio.to_thread(delete_local_files, self.settings, name)
        return gone

    async def take_over_dead_workers(self) -> list[str]:
        silent_since = utcnow() - timedelta(seconds=self.settings.worker_timeout_s)
        async with self.db.read() as session:
            dead = (await session.scalars(
                select(Worker.executor_id).where(Worker.heartbeat_at < silent_since, Worker.executor_id != self.executor_id)
            )).all()
        taken = []
        for executor_id in dead:
            async with self.db.transaction() as session:  # exactly one live worker claims each dead one
                claimed = await session.execute(
                    delete(Worker).where(Worker.executor_id == executor_id, Worker.heartbeat_at < silent_since)
                )
            if claimed.rowcount:
                handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [executor_id])
                log.warning("worker %s is silent: %d of its runs recovered for the live workers", executor_id, len(handles))
                taken.append(executor_id)
        return taken

    async def reconcile(self) -> list[str]:
        """Fails the runs whose workflow ended while the run row did not, or that belong to another version (an upgrade
        mid-run); enqueues queued runs without one."""
        async with self.db.read() as session:
            active = (await session.execute(
                select(Run.id, Run.attempt, Run.status).where(Run.status.in_((RunStatus.QUEUED, RunStatus.RUNNING)))
            )).all()
        now = time.monotonic()
        if not active:
            self._stalled = {}
            return []
        by_workflow = {queue.workflow_id(run_id, attempt): (run_id, attempt, status) for run_id, attempt, status in active}
        known = {w.workflow_id: w for w in await DBOS.list_workflows_async(workflow_ids=list(by_workflow))}
        running_here = set(durable.running_here())
        stalled = {}
        ended = []
        for workflow_id, (run_id, attempt, status) in by_workflow.items():
            found = known.get(workflow_id)
            state = found.status if found else None
            if found is None and status == RunStatus.QUEUED:  # a crash lost the enqueue (enqueue dedupes)
                await queue.enqueue(run_id, attempt)
            elif state in durable.WORKFLOW_ENDED:
                await self._fail(run_id, f"the run's workflow ended ({state}) without recording why; see the server log. "
                                         "Resume it to continue.")
                log.warning("run %s: its workflow ended in %s; marked failed (resumable)", run_id, state)
                ended.append(run_id)
            elif found is not None and found.app_version not in (None, tasks.APPLICATION_VERSION):
                await DBOS.cancel_workflow_async(workflow_id)  # no worker of this version runs it; it would hold a queue slot
                await self._fail(run_id, f"the service was upgraded while this run was in flight, and its workflow belongs to "
                                         f"another version ({found.app_version}); resume it to continue after its last "
                                         "recorded iteration.")
                log.warning("run %s: its workflow is of version %s; marked failed (resumable)", run_id, found.app_version)
                ended.append(run_id)
            elif state == "PENDING" and found.executor_id == self.executor_id and workflow_id not in running_here:
                # Ours, yet not executing here: it died recording its outcome (a full disk, say) and nothing would
                # ever run it again before a restart. Once that has lasted WORKER_TIMEOUT_S (recovery at start-up
                # may take a moment to pick a workflow up), the run ends, resumable.
                stalled[workflow_id] = since = self._stalled.get(workflow_id, now)
                if now - since >= self.settings.worker_timeout_s:
                    await DBOS.cancel_workflow_async(workflow_id)
                    await self._fail(run_id, "the run's workflow stopped without recording its outcome (the database could "
                                             "not be written; see the server log). Resume it to continue after its last "
                                             "recorded iteration.")
                    log.warning("run %s: its workflow stopped executing without an outcome; marked failed (resumable)", run_id)
                    ended.append(run_id)
                    del stalled[workflow_id]
        self._stalled = stalled
        return ended

    async def restart_stalled_drafting(self) -> list[str]:
        """Resumes our batches', chunks' and evaluations' workflows that DBOS claimed for this worker but never started
        (it could not read them: the database went away between the claim and the start), once that has lasted
        WORKER_TIMEOUT_S: whichever worker dequeues one runs it from its last step. Their steps are idempotent, and a
        batch waits for its chunks by id, so it goes on as soon as the chunk ends."""
        pending = await DBOS.list_workflows_async(
            status="PENDING", name=[w.name for w in DRAFTING], executor_id=self.executor_id, load_input=False,
            load_output=False)
        running_here, now = set(durable.running_here()), time.monotonic()
        stalled, restarted = {}, []
        for workflow in pending:
            if workflow.workflow_id in running_here:
                continue
            stalled[workflow.workflow_id] = since = self._stalled_drafting.get(workflow.workflow_id, now)
            if now - since >= self.settings.worker_timeout_s:
                await DBOS.resume_workflow_async(workflow.workflow_id)
                log.warning("workflow %s (%s) was claimed here but never started; resumed", workflow.workflow_id,
                            workflow.name)
                restarted.append(workflow.workflow_id)
                del stalled[workflow.workflow_id]
        self._stalled_drafting = stalled
        return restarted

    async def _fail(self, run_id: str, message: str) -> None:
        async with self.db.transaction() as session:
            await transitions.fail(session, run_id, None, message)
