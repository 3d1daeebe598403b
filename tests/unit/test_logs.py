"""The log lines an operator reads: DBOS's cancellation tracebacks become one line per run, and
database URLs are shown with their password masked."""

import logging

# At collection: importing DBOS runs `file` (its croniter asks for the word size), and a unit test may not start a process.
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSException, DBOSWorkflowCancelledError

from app import logs


def dbos_records(*records: tuple[int, str, BaseException | None]) -> list[logging.LogRecord]:
    """What DBOS's logger lets through, with the filter installed."""
    kept = []
    line = logs.CancellationLine()
    for level, message, exc in records:
        record = logging.LogRecord("dbos", level, __file__, 1, message, (), (type(exc), exc, None) if exc else None)
        if line.filter(record):
            kept.append(record)
    return kept


def test_a_cancellation_traceback_becomes_one_line_per_run_and_other_errors_stay():
    chained = RuntimeError("outer")
    chained.__context__ = DBOSWorkflowCancelledError("Workflow run_b was cancelled")
    kept = dbos_records(
        (logging.WARNING, "Workflow run_a is no longer owned by this execution. Waiting for the owner's recorded outcome", None),
        (logging.WARNING, "Workflow run_a.2 was cancelled during execution. Waiting for the recorded outcome", None),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", DBOSAwaitedWorkflowCancelledError("run_a.2")),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", DBOSAwaitedWorkflowCancelledError("run_a.2")),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", chained),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", ValueError("a real failure")),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", DBOSException("System database accessed before DBOS was launched")),
    )
    shown = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in kept if r.levelno >= logging.WARNING]
    assert shown == [
        (logging.WARNING, "run run_a cancelled", False),
        (logging.WARNING, "run run_b cancelled", False),
        (logging.ERROR, "Exception encountered in asynchronous workflow:", True),  # not a cancellation: kept whole
    ]


def test_masked_urls():
    assert logs.masked_url("postgresql://u:secret@127.0.0.1:1/db") == "postgresql://u:***@127.0.0.1:1/db"
    assert logs.masked_url("postgresql://u@host/db?password=x&sslmode=require") == "postgresql://u@host/db?password=***&sslmode=require"
    assert logs.masked_url("sqlite:///./data/codreamer.sqlite") == "sqlite:///./data/codreamer.sqlite"
