"""Process log hygiene: a cancelled run is one line, not DBOS's traceback; no password or hook URL is printed.

When a run is cancelled, DBOS logs `Exception encountered in asynchronous workflow` at ERROR
with a `DBOSWorkflowCancelledError` (or `DBOSAwaitedWorkflowCancelledError`) traceback. That is
the expected end of a cancelled workflow, so `CancellationLine` rewrites such a record into
`run <id> cancelled` at WARNING (once per run; DBOS's console shows WARNING and up) and leaves
every other DBOS error as it is. A cancel also takes the workflow from the execution running it,
which DBOS reports as `Workflow <id> is no longer owned by this execution`, and a workflow that
sees its own cancel at a step is reported as `Workflow <id> was cancelled during execution`: those
warnings are demoted to INFO, so a cancel reads as one line (the execution that took the workflow over logs
its own outcome). A workflow interrupted by shutdown fails on DBOS being down, unrecorded: that
traceback is demoted to one INFO line too, as the shutdown already says how many runs it left.

`ClientGone` drops uvicorn's `Exception in ASGI application` traceback when the exception is a
client that disconnected before its request body was read (an interrupted run's model calls, a
caller that gave up): nothing failed on the server's side.

`RepeatLimit` bounds what anyone who can send a request can make the log say: of the records of one
kind (same logger, level, line of code and exception class) it lets `limit` through per `period_s`,
counts the rest, and notes the count on the first one let through after that.

`HookUrls` replaces the source id of every `/outcomes/hooks/<id>` path in a line with `***`.
"""

import logging
import re
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

DBOS_LOGGER = "dbos"
_WORKFLOW_ID = re.compile(r"[Ww]orkflow (\S+?)[:,]? (?:was|is|has been) cancelled")
_INTERRUPTED = "Asyncio task cancelled for workflow or step"
_CANCEL_SIDE_LINES = ("is no longer owned by this execution", "was cancelled during execution")
_DBOS_DOWN = ("accessed before DBOS was launched", "No DBOS was created yet")
_interrupting = False
LOG_REPEATS, LOG_REPEAT_PERIOD_S = 10, 60.0  # Settings.log_repeats and log_repeat_period_s, until serve or worker read them


@contextmanager
def quiet_interruptions() -> Iterator[None]:
    """While shutdown interrupts runs, DBOS's per-step `Asyncio task cancelled` warnings are dropped."""
    global _interrupting
    _interrupting = True
    try:
        yield
    finally:
        _interrupting = False


def _cancellation(exc: BaseException | None) -> BaseException | None:
    """The DBOS cancellation error in `exc`'s chain, if any."""
    try:
        from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError
    except ImportError:  # pragma: no cover - another DBOS version: keep its records untouched
        return None
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (DBOSWorkflowCancelledError, DBOSAwaitedWorkflowCancelledError)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _dbos_down(exc: BaseException | None) -> bool:
    """Whether `exc` comes from a workflow still running once DBOS was destroyed (shutdown)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if type(exc).__name__ == "DBOSException" and any(text in str(exc) for text in _DBOS_DOWN):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _run_id(exc: BaseException) -> str:
    workflow_id = getattr(exc, "workflow_id", None)
    if workflow_id is None:
        match = _WORKFLOW_ID.search(str(exc))
        workflow_id = match.group(1) if match else "?"
    return workflow_id.split(".", 1)[0]  # a resumed run's workflow id is `<run id>.<attempt>`


class CancellationLine(logging.Filter):
    """Turns DBOS's traceback for a cancelled workflow into one WARNING line per run, and demotes
    the side lines of a cancel or a shutdown (see the module's docstring)."""

    def __init__(self, remember: int = 1024):
        super().__init__()
        self._announced: OrderedDict[str, None] = OrderedDict()
        self._remember = remember

    def filter(self, record: logging.LogRecord) -> bool:
        if _interrupting and isinstance(record.msg, str) and record.msg.startswith(_INTERRUPTED):
            return False
        if not record.exc_info or record.exc_info[1] is None:
            if record.levelno == logging.WARNING and isinstance(record.msg, str) and any(line in record.msg for line in _CANCEL_SIDE_LINES):
                record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            return True
        if _dbos_down(record.exc_info[1]):
            record.msg, record.args = "a run interrupted by shutdown stopped unrecorded: %s", (record.exc_info[1],)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
            return True
        cancelled = _cancellation(record.exc_info[1])
        if cancelled is None:
            return True
        run_id = _run_id(cancelled)
        if run_id in self._announced:
            return False
        self._announced[run_id] = None
        if len(self._announced) > self._remember:
            self._announced.popitem(last=False)
        record.msg, record.args = "run %s cancelled", (run_id,)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


class ClientGone(logging.Filter):
    """Drops uvicorn's traceback for a request whose client disconnected before its body was read."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.exc_info or record.exc_info[1] is None:
            return True
        try:
            from starlette.requests import ClientDisconnect
        except ImportError:  # pragma: no cover
            return True
        exc, seen = record.exc_info[1], set()
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, ClientDisconnect):
                return False
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        return True


class RepeatLimit(logging.Filter):
    """Lets `limit` records of a kind through per `period_s` (0: all) and counts the others; the first record let
    through after some were held back says how many. A kind: the same logger, level, line of code (so the same
    message template whatever its arguments, also where a library formats the text itself: a client cannot make each
    line new by varying what it sends) and exception class."""

    def __init__(self, limit: int = LOG_REPEATS, period_s: float = LOG_REPEAT_PERIOD_S, remember: int = 1024,
                 clock=time.monotonic):
        super().__init__()
        self.limit, self.period_s, self._remember, self._clock = limit, period_s, remember, clock
        self._kinds: OrderedDict[tuple, list] = OrderedDict()  # kind -> [window start, let through, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.limit <= 0 or getattr(record, "_repeat_counted", False):  # counted at its logger already
            return True
        record._repeat_counted = True
        exc = record.exc_info[1] if record.exc_info else None
        kind = (record.name, record.levelno, record.pathname, record.lineno, type(exc).__name__ if exc is not None else None)
        now, seen = self._clock(), self._kinds.get(kind)
        if seen is None or now - seen[0] >= self.period_s:
            held = seen[2] if seen else 0
            self._kinds[kind] = [now, 1, 0]
            self._kinds.move_to_end(kind)
            if len(self._kinds) > self._remember:
                self._kinds.popitem(last=False)
            if held:
                record.msg, record.args = f"{record.getMessage().rstrip()} [and {held} more like this not logged in the " \
                                          f"{now - seen[0]:.0f} s before]", ()
            return True
        if seen[1] < self.limit:
            seen[1] += 1
            if seen[1] == self.limit:
                record.msg, record.args = f"{record.getMessage().rstrip()} [{self.limit} like this within {self.period_s:g} s: " \
                                          f"more are counted, not logged]", ()
            return True
        seen[2] += 1
        return False


_repeats = RepeatLimit()


_HOOK_ID = re.compile(r"(/outcomes/hooks/)([^/\s?#\"']+)")


def redacted(text: str) -> str:
    """`text` with every outcome hook's source id replaced by `***`."""
    return _HOOK_ID.sub(r"\1***", text)


class HookUrls(logging.Filter):
    """An outcome source's hook URL is the only credential of SendGrid's and Mailgun's inbound mail: its id never
    reaches a log line (uvicorn's access lines, an error's path, a traceback). Arguments are redacted one by one, as
    uvicorn's access formatter reads them apart."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redacted(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redacted(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: redacted(arg) if isinstance(arg, str) else arg for key, arg in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = redacted(logging.Formatter().formatException(record.exc_info))
        return True


_hook_urls = HookUrls()
SECRET_PATH_LOGGERS = ("uvicorn.access", "uvicorn.error", DBOS_LOGGER, "codreamer", "app")


def limit_repeats(limit: int, period_s: float) -> None:
    """Sets the process's repeat limit (`install` starts with LOG_REPEATS per LOG_REPEAT_PERIOD_S)."""
    _repeats.limit, _repeats.period_s = limit, period_s


def install() -> None:
    """Adds the filters to DBOS's and uvicorn's loggers, and the repeat limit to every line the process prints:
    those loggers (they have handlers of their own) and the handler of last resort, which prints the records of every
    logger without a handler (ours, `app.*`, the libraries'). Once per process."""
    for name, kind in ((DBOS_LOGGER, CancellationLine), ("uvicorn.error", ClientGone)):
        logger = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in logger.filters):
            logger.addFilter(kind())
    for where in (logging.getLogger(DBOS_LOGGER), logging.getLogger("uvicorn.error"), logging.lastResort):
        if where is not None and _repeats not in where.filters:
            where.addFilter(_repeats)  # after the filters above: a cancellation is counted as the line it became
    for where in (*map(logging.getLogger, SECRET_PATH_LOGGERS), logging.lastResort, *logging.getLogger().handlers):
        if where is not None and _hook_urls not in where.filters:
            where.addFilter(_hook_urls)


def masked_url(url: str) -> str:
    """`url` with its password (and any `password=` parameter) replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    path = re.sub(r"(?i)(password=)[^&]*", r"\1***", path)
    return f"{scheme}://{netloc}{slash}{path}"


def database_errors() -> tuple[type[BaseException], ...]:
    """What a database that cannot be reached or used raises: a wrong URL, a refused connection,
    a file that is no database, a revision the code does not know."""
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    return SQLAlchemyError, CommandError, OSError, ValueError


def database_problem(url: str, exc: BaseException) -> str:
    """One line naming the database (password masked) and why it cannot be used."""
    cause = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    reason = lines[0] if lines else type(cause).__name__
    _, _, rest = url.partition("://")
    userinfo = rest.partition("/")[0].rpartition("@")[0]
    password = userinfo.partition(":")[2]
    if password:
        reason = reason.replace(password, "***")
    return f"database {masked_url(url)} is unreachable or invalid: {reason}"
