"""A child process kept alive: restarted when it dies, at once, then with growing pauses, never given up.

The embedded model server and `serve`'s run worker are both such children; each says how to start itself.
"""

import logging
import subprocess
import threading
import time

log = logging.getLogger("codreamer")

RESTARTS_PER_MINUTE = 3  # restarted at once up to this many times a minute; after that, with growing pauses
MAX_PAUSE_S = 30.0  # a child that keeps dying (a bad checkpoint, memory) is retried at least this often


class SupervisedChild:
    """Subclasses name the child (`what`, for logs and readiness) and start it (`_launch`); call `_start` once."""

    what = "child process"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._starts: list[float] = []
        self._child: subprocess.Popen | None = None
        self._paused_until: float | None = None

    def _launch(self) -> subprocess.Popen:
        raise NotImplementedError

    def _handed_over(self, child: subprocess.Popen) -> None:
        """Runs in the watching thread before it waits on the child: what the child must be told, it is told here."""

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def problem(self) -> str | None:
        """Why the child cannot serve now (it keeps dying and waits before its next start), or None."""
        paused_until = self._paused_until
        if paused_until is None:
            return None
        return (f"the {self.what} exited {len(self._starts)} times in a minute; it is restarted in "
                f"{max(0.0, paused_until - time.monotonic()):.0f} s")

    def _start(self) -> None:
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        """Starts the child (with `_lock` held) and a thread that watches it."""
        self._starts = [t for t in self._starts if time.monotonic() - t < 60] + [time.monotonic()]
        child = self._launch()
        self._child = child
        threading.Thread(target=self._supervise, args=(child,), name=self.what, daemon=True).start()

    def _supervise(self, child: subprocess.Popen) -> None:
        self._handed_over(child)
        code = child.wait()
        with self._lock:
            if self._stopping.is_set() or child is not self._child:
                return
            starts = len([t for t in self._starts if time.monotonic() - t < 60])
            pause = 0.0 if starts <= RESTARTS_PER_MINUTE else min(MAX_PAUSE_S, 2.0 ** (starts - RESTARTS_PER_MINUTE))
            if not pause:
                log.error("the %s exited with code %s; restarting it", self.what, code)
                self._spawn()
                return
            log.error("the %s exited with code %s, %d times in a minute; restarting it in %.0f s", self.what, code, starts, pause)
            self._paused_until = time.monotonic() + pause
        if self._stopping.wait(pause):
            return
        with self._lock:
            self._paused_until = None
            if not self._stopping.is_set() and child is self._child:
                self._spawn()

    def _stop(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL once `timeout` has passed; never restarted again. Blocks: run it in a thread."""
        with self._lock:
            self._stopping.set()
            child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("the %s did not stop within %.0f s; killing it", self.what, timeout)
                child.kill()
                child.wait()
        try:
            child.stdin.close()
        except (OSError, ValueError, AttributeError):
            pass
