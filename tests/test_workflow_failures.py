"""A failure in any step of the workflow ends the run `failed`, naming the step, and the run resumes."""

import asyncio
import sqlite3

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError, OperationalError

from app.events import service as events
from app.runs.status import Step
from app.runs.events import EventType
from app.local import local_service, run_to_end
from app.runs import repository, service, transitions, workflow
from app.runs.executor import current
from app.runs.models import TrajectoryRecord
from app.runs.workers import Housekeeper
from app.runs.schemas import LearnLoopRequest
from app.settings import Settings

REQUEST = LearnLoopRequest(iterations=1, rollouts_per_group=2, scenario_ids=["scn-healthcare-cto"], max_turns=4)
POINTS = ["start", "email:0", "generate:1", "score:1", "train:1", "reweight:1", "email:1", "publish:1", "finish"]


@pytest.fixture(scope="module")
async def process(tmp_path_factory):
    async with local_service(tmp_path_factory.mktemp("failures"), Settings(_env_file=None)) as process:
        yield process


async def _events(process, run_id):
    async with process.api.db.read() as session:
        page, _ = await events.events_page(session, run_id, after=0, limit=100)
    return page


@pytest.mark.parametrize("point", POINTS)
async def test_a_failing_step_fails_the_run_and_resume_finishes_it(process, point, monkeypatch):
    monkeypatch.setenv("FAIL_AT", point)
    failed = await run_to_end(process, REQUEST)
    assert failed["status"] == "failed"
    assert failed["error"]["step"] == point.split(":")[0]
    assert f"injected failure at {point}" in failed["error"]["message"]
    emitted = await _events(process, failed["run_id"])
    assert emitted[-1].type == EventType.RUN_FAILED and emitted[-1].data["error"] == failed["error"]
    assert not current().holds(failed["run_id"]), "the worker still holds the failed run's model"

    monkeypatch.delenv("FAIL_AT")
    async with process.api.db.transaction() as session:
        run = await transitions.resume(session, failed["run_id"])
    await workflow.enqueue(run.id, run.attempt)
    assert await workflow.wait(run.id, run.attempt) == "succeeded"
    async with process.api.db.read() as session:
        view = await repository.get_run_view(session, run.id)
        recorded = [i["iteration"] for i in await repository.iterations(session, run.id)]
    assert view["status"] == "succeeded" and view["error"] is None
    assert recorded == [0, 1], "each iteration is recorded exactly once across the failure and the resume"
    assert (await _events(process, run.id))[-1].type == EventType.RUN_SUCCEEDED


async def test_a_cancelled_run_releases_what_the_worker_holds(process):
    created, _ = await service.create_run(process.api, REQUEST.model_copy(update={"iterations": 50}))
    while not current().holds(created.run_id):  # the workflow has loaded the run's model
        await asyncio.sleep(0.05)
    async with process.api.db.transaction() as session:
        await transitions.cancel(session, created.run_id)
    await workflow.cancel(created.run_id, 1)
    for _ in range(600):  # the step in flight finishes, then the workflow stops and lets go
        if not current().holds(created.run_id):
            break
        await asyncio.sleep(0.05)
    assert not current().holds(created.run_id)
    assert (await _events(process, created.run_id))[-1].type == EventType.RUN_CANCELLED


async def test_a_run_whose_workflow_ended_unrecorded_is_reconciled(process, monkeypatch):
    """The failure itself cannot be recorded (the database is gone, say): the workflow ends in ERROR, the
    run row still says running; the worker's reconciliation ends it `failed`, and it can be resumed."""
    monkeypatch.setenv("FAIL_AT", "start,fail")  # the run fails at start, and recording that fails too
    created, _ = await service.create_run(process.api, REQUEST)
    with pytest.raises(Exception):
        await workflow.wait(created.run_id)
    # The worker's housekeeping reconciles every few seconds; a pass now does it at once (idempotent).
    await Housekeeper(process.api.db, process.api.settings).reconcile()
    async with process.api.db.read() as session:
        view = await repository.get_run_view(session, created.run_id)
    assert view["status"] == "failed" and "ERROR" in view["error"]["message"]
    assert (await _events(process, created.run_id))[-1].type == EventType.RUN_FAILED


async def test_passing_database_errors_are_retried_and_others_are_not(process):
    calls = []

    @workflow.workflow_step(Step.REWEIGHT)
    async def flaky(run_id: str, errors: list) -> str:
        calls.append(run_id)
        if errors:
            raise errors.pop(0)
        return "done"

    locked = OperationalError("UPDATE runs SET secret = ?", ("hunter2",), sqlite3.OperationalError("database is locked"))
    assert await flaky("run_a", [locked, locked]) == "done" and len(calls) == 3
    with pytest.raises(workflow.StepFailed) as failed:
        await flaky("run_b", [IntegrityError("INSERT INTO runs VALUES (?)", ("hunter2",), sqlite3.IntegrityError("dup"))])
    assert failed.value.step == Step.REWEIGHT and len(calls) == 4
    assert "hunter2" not in failed.value.message and "INSERT" not in failed.value.message


async def test_retention_keeps_rewards_and_emails_and_drops_old_conversations(process, monkeypatch):
    monkeypatch.setattr(process.api.settings, "trajectory_retention_iterations", 1)
    finished = await run_to_end(process, REQUEST.model_copy(update={"iterations": 3}))
    assert finished["status"] == "succeeded"
    async with process.api.db.read() as session:
        rows = (await session.execute(select(TrajectoryRecord.iteration, TrajectoryRecord.trajectory, TrajectoryRecord.reward,
                                             TrajectoryRecord.email).where(TrajectoryRecord.run_id == finished["run_id"]))).all()
    assert {i for i, *_ in rows} == {1, 2, 3}
    assert all(trajectory == {} for i, trajectory, *_ in rows if i < 3)
    assert all(trajectory["messages_and_choices"] for i, trajectory, *_ in rows if i == 3)
    assert all(reward is not None and email is not None for *_, reward, email in rows)


async def test_a_cancelled_run_leaves_no_trajectories_of_an_unrecorded_iteration(process):
    created, _ = await service.create_run(process.api, REQUEST.model_copy(update={"iterations": 50}))
    async with process.api.db.read() as session:
        for _ in range(600):  # until an iteration's trajectories are written but it is not yet recorded
            generated = await session.scalar(select(func.max(TrajectoryRecord.iteration)).where(TrajectoryRecord.run_id == created.run_id))
            if generated and generated > (await repository.latest_iteration(session, created.run_id) or 0):
                break
            await asyncio.sleep(0.02)
    async with process.api.db.transaction() as session:
        await transitions.cancel(session, created.run_id)
    await workflow.cancel(created.run_id, 1)
    for _ in range(600):
        if not current().holds(created.run_id):
            break
        await asyncio.sleep(0.05)
    async with process.api.db.read() as session:
        latest = await repository.latest_iteration(session, created.run_id)
        beyond = await session.scalar(select(func.count()).select_from(TrajectoryRecord).where(
            TrajectoryRecord.run_id == created.run_id, TrajectoryRecord.iteration > latest))
    assert beyond == 0
