"""The log lines an operator reads: DBOS's cancellation tracebacks become one line per run, and
database URLs are shown with their password masked."""

import logging

# At collection: importing DBOS runs `file` (its croniter asks for the word size), and a unit test may not start a process.
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSException, DBOSWorkflowCancelledError

from app.kit import logs


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


def record(line: int, message: str, *args, level=logging.ERROR, exc: BaseException | None = None) -> logging.LogRecord:
    return logging.LogRecord("codreamer", level, "app/http/errors.py", line, message, args,
                             (type(exc), exc, None) if exc else None)


def test_repeats_of_one_kind_are_limited_per_period_and_counted():
    now = [0.0]
    limit = logs.RepeatLimit(limit=3, period_s=60, clock=lambda: now[0])
    passed = [r.getMessage() for n in range(10) if limit.filter(r := record(140, "unhandled error on %s", f"/x/{n}"))]
    assert passed[:2] == ["unhandled error on /x/0", "unhandled error on /x/1"]  # its arguments do not make a new kind
    assert passed[2] == "unhandled error on /x/2 [3 like this within 60 s: more are counted, not logged]"
    assert len(passed) == 3
    # another line, level or exception class is another kind, let through meanwhile
    assert limit.filter(record(141, "unhandled error on %s", "/x"))
    assert limit.filter(record(140, "unhandled error on %s", "/x", level=logging.WARNING))
    assert limit.filter(record(140, "unhandled error on %s", "/x", exc=ValueError("v")))
    now[0] = 59.0
    assert not limit.filter(record(140, "unhandled error on %s", "/x/11"))
    now[0] = 61.0  # a new period: the first line says how many were held back
    first = record(140, "unhandled error on %s", "/x/12")
    assert limit.filter(first)
    assert first.getMessage() == "unhandled error on /x/12 [and 8 more like this not logged in the 61 s before]"
    assert first.exc_info is None and limit.filter(record(140, "unhandled error on %s", "/x/13"))


def test_a_record_is_counted_once_on_its_way_and_no_limit_lets_all_through():
    limit = logs.RepeatLimit(limit=2, period_s=60, clock=lambda: 0.0)
    one = record(7, "a line")
    assert limit.filter(one) and limit.filter(one) and limit.filter(one)  # its logger's filter, then a handler's
    assert limit.filter(record(7, "a line")) and not limit.filter(record(7, "a line"))
    unlimited = logs.RepeatLimit(limit=0, period_s=60)
    assert all(unlimited.filter(record(7, "a line")) for _ in range(100))
