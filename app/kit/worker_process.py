"""The run worker of `codreamer serve`, in a process of its own: started, watched, restarted and stopped by the API.

Run orchestration (rollout turns, DBOS steps, the judge's client, webhooks) keeps an interpreter busy; in the API's
process it made every request wait for it. The child is `codreamer worker --child`: the same worker as on any other
machine, at a lower CPU priority than the API. It learns that its parent is gone when its end of our pipe on its
stdin closes (even after `kill -9`), and then dies at once, like a crash: its runs resume when a worker with the
same EXECUTOR_ID starts, which is the next `serve`'s child.
"""

import asyncio
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from app.kit.supervision import READY, SupervisedChild, report_status, status_env

WORKER_NICENESS = 5  # below the API; the embedded model server, the worker's child, sits below both
PARENT_ENV = "CODREAMER_SERVE_PID"  # set in the child: fault drills crash the whole service, not one process


class WorkerProcess(SupervisedChild):
    """`codreamer worker --child`, restarted when it dies; stopped with SIGTERM, so it drains its runs first."""

    what = "run worker"

    def __init__(self, stop_timeout_s: float):
        super().__init__()
        self._stop_timeout_s = stop_timeout_s
        self._start()

    def _launch(self, status_fd: int) -> subprocess.Popen:
        child = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--child"], stdin=subprocess.PIPE, pass_fds=(status_fd,),
            env=status_env(status_fd) | {PARENT_ENV: str(os.getpid())},
            # Its own process group: a terminal's Ctrl-C reaches the API, which stops the worker in turn.
            process_group=0,
        )
        try:  # lowered here, before it starts a thread (its threads and children inherit both)
            os.setpriority(os.PRIO_PROCESS, child.pid, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)
            if hasattr(os, "SCHED_BATCH"):  # Linux: a waking request preempts it at once, not after its time slice
                os.sched_setscheduler(child.pid, os.SCHED_BATCH, os.sched_param(0))
        except OSError:
            pass  # it died already; the watching thread sees it
        return child

    def stop(self) -> None:
        """Blocks: run it in a thread."""
        self._stop(self._stop_timeout_s)


def follow_parent() -> None:
    """In the child: die with the parent (its end of our stdin closes, or we are re-parented)."""
    parent = int(os.environ[PARENT_ENV])

    def watch() -> None:
        while True:
            readable, _, _ = select.select([sys.stdin], [], [], 1.0)
            if (readable and not os.read(sys.stdin.fileno(), 4096)) or os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)  # as a crash: nothing recorded, everything resumes

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


FORWARD_EVERY_S = 0.5


async def forward_readiness(health: list[Callable[[], str | None]], stopping: asyncio.Event) -> None:
    """In the child: tells `serve` whether this worker can run (its model server up, its database reachable), as its
    readiness checks say, whenever that changes, so that `serve`'s /readyz covers what runs in its children."""
    said = None
    while not stopping.is_set():
        status = "; ".join(problem for check in health if (problem := check())) or READY
        if status != said:
            report_status(status)
            said = status
        try:
            await asyncio.wait_for(stopping.wait(), FORWARD_EVERY_S)
        except TimeoutError:
            pass


def crash_service() -> None:
    """A fault drill's crash takes the whole service down, as a machine failure would: the API first, then itself."""
    if parent := os.environ.get(PARENT_ENV):
        os.kill(int(parent), signal.SIGKILL)
