"""The run worker of `codreamer serve`, in a process of its own: started, watched, restarted and stopped by the API.

Run orchestration (rollout turns, DBOS steps, the judge's client, webhooks) keeps an interpreter busy; in the API's
process it made every request wait for it. The child is `codreamer worker --child`: the same worker as on any other
machine, at a lower CPU priority than the API. It learns that its parent is gone when its end of our pipe on its
stdin closes (even after `kill -9`), and then dies at once, like a crash: its runs resume when a worker with the
same EXECUTOR_ID starts, which is the next `serve`'s child.
"""

import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time

log = logging.getLogger("codreamer")

WORKER_NICENESS = 5  # below the API; the embedded model server, the worker's child, sits below both
RESTARTS_PER_MINUTE = 3
MAX_PAUSE_S = 30.0
PARENT_ENV = "CODREAMER_SERVE_PID"  # set in the child: fault drills crash the whole service, not one process


class WorkerProcess:
    """`codreamer worker --child`, restarted when it dies (at once, then with growing pauses), never given up."""

    def __init__(self, stop_timeout_s: float):
        self._stop_timeout_s = stop_timeout_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._starts: list[float] = []
        self._child: subprocess.Popen | None = None
        self._paused_until: float | None = None
        with self._lock:
            self._spawn()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def problem(self) -> str | None:
        """Why runs are not being worked on now (the worker keeps dying and waits before its next start), or None."""
        paused_until = self._paused_until
        if paused_until is None:
            return None
        return (f"the run worker exited {len(self._starts)} times in a minute; it is restarted in "
                f"{max(0.0, paused_until - time.monotonic()):.0f} s")

    def _spawn(self) -> None:
        self._starts = [t for t in self._starts if time.monotonic() - t < 60] + [time.monotonic()]
        child = subprocess.Popen(
            [sys.executable, "-m", "app", "worker", "--child"], stdin=subprocess.PIPE,
            env=os.environ | {PARENT_ENV: str(os.getpid())},
            # Its own process group: a terminal's Ctrl-C reaches the API, which stops the worker in turn.
            process_group=0,
        )
        try:  # lowered here, before it runs anything: requests come first from its first instant
            os.setpriority(os.PRIO_PROCESS, child.pid, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)
        except OSError:
            pass  # it died already; _supervise sees it
        self._child = child
        threading.Thread(target=self._supervise, args=(child,), name="run-worker", daemon=True).start()

    def _supervise(self, child: subprocess.Popen) -> None:
        code = child.wait()
        with self._lock:
            if self._stopping.is_set() or child is not self._child:
                return
            starts = len([t for t in self._starts if time.monotonic() - t < 60])
            pause = 0.0 if starts <= RESTARTS_PER_MINUTE else min(MAX_PAUSE_S, 2.0 ** (starts - RESTARTS_PER_MINUTE))
            log.error("the run worker exited with code %s; restarting it%s", code, f" in {pause:.0f} s" if pause else "")
            if not pause:
                self._spawn()
                return
            self._paused_until = time.monotonic() + pause
        if self._stopping.wait(pause):
            return
        with self._lock:
            self._paused_until = None
            if not self._stopping.is_set() and child is self._child:
                self._spawn()

    def stop(self) -> None:
        """SIGTERM: the worker drains its runs (SHUTDOWN_DRAIN_S) and stops; killed if it outlives the timeout.
        Blocks: run it in a thread."""
        with self._lock:
            self._stopping.set()
            child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(self._stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("the run worker did not stop within %.0f s; killing it", self._stop_timeout_s)
                child.kill()
                child.wait()
        try:
            child.stdin.close()
        except (OSError, ValueError):
            pass


def follow_parent() -> None:
    """In the child: die with the parent (its end of our stdin closes, or we are re-parented)."""
    parent = int(os.environ[PARENT_ENV])

    def watch() -> None:
        while True:
            readable, _, _ = select.select([sys.stdin], [], [], 1.0)
            if (readable and not os.read(sys.stdin.fileno(), 4096)) or os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)  # as a crash: nothing recorded, everything resumes

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def crash_service() -> None:
    """A fault drill's crash takes the whole service down, as a machine failure would: the API first, then itself."""
    if parent := os.environ.get(PARENT_ENV):
        os.kill(int(parent), signal.SIGKILL)
