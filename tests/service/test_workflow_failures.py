"""A failure in any step of the workflow ends the run `failed`, naming the step, and the run resumes."""

import asyncio
import functools
import sqlite3
from datetime import datetime

import pytest
from dbos import DBOS
from dbos._serialization import DefaultSerializer
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError, OperationalError

from app import tasks
from app.engine.executor import current
from app.events import service as events
from app.events.schemas import Subject, SubjectKind
from app.kit.settings import Settings
from app.lifecycle.api import dbos_database_url
from app.lifecycle.local import local_service, run_to_end
from app.loop.schemas import FeedbackMode
from app.runs import queue, repository, service, transitions, workflow
from app.runs.events import EventType
from app.runs.models import Iteration, NodeScoreChange, Run, TrajectoryRecord
from app.runs.schemas import LearnLoopRequest
from app.runs.status import RunStatus, Step
from app.runs.workers import Housekeeper

REQUEST = LearnLoopRequest(iterations=1, rollouts_per_group=2, scenario_ids=["scn-healthcare-cto"], max_turns=4)
POINTS = ["start", "email:0", "generate:1", "score:1", "train:1", "reweight:1", "email:1", "publish:1", "finish"]


@pytest.fixture(scope="module")
async def process(tmp_path_factory):
    async with local_service(tmp_path_factory.mktemp("failures"), Settings(_env_file=None)) as process:
        yield process


async def _events(process, run_id):
    async with process.api.db.read() as session:
        page, _ = await events.events_page(session, Subject(SubjectKind.RUN, run_id, "public"), after=0, limit=100)
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
    await queue.enqueue(run.id, run.attempt)
    assert await queue.result(run.id, run.attempt) == "succeeded"
    async with process.api.db.read() as session:
        view = await repository.get_run_view(session, run.id)
        recorded = [i["iteration"] for i in await repository.iterations(process.api.db, run.id)]
    assert view["status"] == "succeeded" and view["error"] is None
    assert recorded == [0, 1], "each iteration is recorded exactly once across the failure and the resume"
    assert (await _events(process, run.id))[-1].type == EventType.RUN_SUCCEEDED


async def test_a_cancelled_run_releases_what_the_worker_holds(process):
    created, _ = await service.create_run(process.api, REQUEST.model_copy(update={"iterations": 50}))
    while not current().holds(created.run_id):  # the workflow has loaded the run's model
        await asyncio.sleep(0.05)
    async with process.api.db.transaction() as session:
        await transitions.cancel(session, created.run_id)
    await queue.cancel(created.run_id, 1)
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
        await queue.result(created.run_id)
    # The worker's housekeeping reconciles every few seconds; a pass now does it at once (idempotent).
    await Housekeeper(process.api.db, process.api.settings).reconcile()
    async with process.api.db.read() as session:
        view = await repository.get_run_view(session, created.run_id)
    assert view["status"] == "failed" and "ERROR" in view["error"]["message"]
    assert (await _events(process, created.run_id))[-1].type == EventType.RUN_FAILED


async def test_passing_database_errors_are_retried_and_others_are_not(process, monkeypatch):
    calls = []

    @workflow.workflow_step(Step.REWEIGHT)
    async def flaky(run_id: str, errors: list) -> str:
        calls.append(run_id)
        if errors:
            raise errors.pop(0)
        return "done"

    existing = (await run_to_end(process, REQUEST))["run_id"]
    locked = OperationalError("UPDATE runs SET secret = ?", ("hunter2",), sqlite3.OperationalError("database is locked"))
    assert await flaky(existing, [locked, locked]) == "done" and len(calls) == 3
    duplicate = IntegrityError("INSERT INTO runs VALUES (?)", ("hunter2",), sqlite3.IntegrityError("dup"))
    with pytest.raises(workflow.StepFailed) as failed:
        await flaky(existing, [duplicate])
    assert failed.value.step == Step.REWEIGHT and len(calls) == 4
    assert "hunter2" not in failed.value.message and "INSERT" not in failed.value.message
    assert "Resume it" not in failed.value.message  # a bug resumed fails again
    # a passing error that outlasts every retry (a disk full for longer): the run ends resumable, and says so
    monkeypatch.setattr(workflow, "through_database_trouble", functools.partial(workflow.through_database_trouble, retries=1))
    with pytest.raises(workflow.StepFailed) as failed:
        await flaky(existing, [locked, locked, locked])
    assert len(calls) == 6 and "hunter2" not in failed.value.message
    assert failed.value.message.startswith("database error (OperationalError)") and "Resume it" in failed.value.message
    with pytest.raises(transitions.RunGone):  # the same failure of a run deleted meanwhile ends it as a deletion
        await flaky("run_deleted_meanwhile", [duplicate])


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
    await queue.cancel(created.run_id, 1)
    for _ in range(2400):  # the step in flight notices the cancel, then the worker lets go (slow on a busy machine)
        if not current().holds(created.run_id):
            break
        await asyncio.sleep(0.05)
    assert not current().holds(created.run_id)
    async with process.api.db.read() as session:
        latest = await repository.latest_iteration(session, created.run_id)
        beyond = await session.scalar(select(func.count()).select_from(TrajectoryRecord).where(
            TrajectoryRecord.run_id == created.run_id, TrajectoryRecord.iteration > latest))
    assert beyond == 0


# ---------------------------------------------------------------- a run in flight across an upgrade

def _dbos_tables(process):
    return sqlite3.connect(dbos_database_url(process.api.settings).removeprefix("sqlite:///"), timeout=60)


def _as_the_dict_steps_wrote_it(output):
    """A checkpoint as steps wrote it before they returned models: dicts, the status an enum, times by isoformat()."""
    if isinstance(output, str):
        return RunStatus(output)
    old = dict(output)
    if "status" in old:
        old["status"] = RunStatus(old["status"])
    if "started_at" in old:
        old["started_at"] = datetime.fromisoformat(old["started_at"]).isoformat()
    return old


async def _in_flight_before_the_last_email(process, rewrite) -> tuple[str, dict, int]:
    """A finished one-iteration run put back to where it was before iteration 1's email, its checkpoints up to
    there rewritten by `rewrite`; returns the run id, iteration 1 as first recorded, and the step to go on from.
    The run learns from the world's estimate (`oracle`), not its sends: the sends reported after the email would
    otherwise change the email the step writes again."""
    finished = await run_to_end(process, REQUEST.model_copy(update={"feedback_source": FeedbackMode.ORACLE}))
    run_id = finished["run_id"]
    async with process.api.db.read() as session:
        first = (await repository.iterations(process.api.db, run_id))[1]
    steps = await DBOS.list_workflow_steps_async(run_id)
    email = [s["function_id"] for s in steps if s["function_name"] == "email"][-1]
    with _dbos_tables(process) as dbos_db:
        for step in steps:
            if step["function_id"] < email and step["function_name"] != "fail":
                dbos_db.execute("UPDATE operation_outputs SET output = ?, serialization = ? WHERE workflow_uuid = ? AND function_id = ?",
                                (DefaultSerializer().serialize(rewrite(step)), "py_pickle", run_id, step["function_id"]))
    async with process.api.db.transaction() as session:
        run = await session.get(Run, run_id)
        run.status, run.finished_at, run.iterations_completed = RunStatus.RUNNING, None, 0
        await session.execute(delete(Iteration).where(Iteration.run_id == run_id, Iteration.iteration == 1))
        await session.execute(delete(NodeScoreChange).where(NodeScoreChange.run_id == run_id, NodeScoreChange.iteration == 1))
    return run_id, first, email


async def test_a_run_checkpointed_with_dict_outputs_resumes_on_typed_steps(process):
    run_id, first, email = await _in_flight_before_the_last_email(process, lambda step: _as_the_dict_steps_wrote_it(step["output"]))
    forked = await DBOS.fork_workflow_async(run_id, email, application_version=tasks.APPLICATION_VERSION)
    assert await forked.get_result() == "succeeded"
    async with process.api.db.read() as session:
        again = (await repository.iterations(process.api.db, run_id))[1]
        run = await repository.get_run_view(session, run_id)
    assert run["status"] == "succeeded" and run["iterations_completed"] == 1
    for field in ("started_at", "rewards", "training", "node_scores_changed", "email"):
        assert again[field] == first[field], field
    assert again["metrics"]["rollouts"] == first["metrics"]["rollouts"]


async def test_a_checkpoint_that_no_longer_fits_fails_the_run_naming_its_step(process):
    def unreadable(step):
        return {"rewards": "not stats"} if step["function_name"] == "generate" else step["output"]

    run_id, _, email = await _in_flight_before_the_last_email(process, unreadable)
    forked = await DBOS.fork_workflow_async(run_id, email, application_version=tasks.APPLICATION_VERSION)
    assert await forked.get_result() == "failed"
    async with process.api.db.read() as session:
        run = await repository.get_run_view(session, run_id)
    assert run["status"] == "failed" and run["error"]["step"] == "generate"
    assert "checkpointed by an incompatible version" in run["error"]["message"] and "resume it" in run["error"]["message"]


async def test_a_run_whose_workflow_belongs_to_another_version_is_failed_resumable(process):
    finished = await run_to_end(process, REQUEST)
    run_id = finished["run_id"]
    async with process.api.db.transaction() as session:
        run = await session.get(Run, run_id)
        run.status, run.finished_at = RunStatus.RUNNING, None
    with _dbos_tables(process) as dbos_db:  # as DBOS left it when a worker of the hashed version stopped mid-run
        dbos_db.execute("UPDATE workflow_status SET status = 'PENDING', application_version = ? WHERE workflow_uuid = ?",
                        ("3f2a9c0d1e", run_id))
    assert await Housekeeper(process.api.db, process.api.settings).reconcile() == [run_id]
    async with process.api.db.read() as session:
        run = await repository.get_run_view(session, run_id)
    assert run["status"] == "failed" and "upgraded while this run was in flight" in run["error"]["message"]
    assert (await DBOS.get_workflow_status_async(run_id)).status == "CANCELLED"  # its queue slot is free
