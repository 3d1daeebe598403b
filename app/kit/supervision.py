"""A child process kept alive: restarted when it dies, at once, then with growing pauses, never given up.

The embedded model server and `serve`'s run worker are both such children; each says how to start itself. A child
says whether it serves on a pipe of its own (`report_status`): "ready", or what keeps it from serving. Until it says
"ready", and from the moment it exits, its parent's readiness names it.
"""

import logging
import os
import subprocess
import threading
import time

log = logging.getLogger("codreamer")

RESTARTS_PER_MINUTE = 3  # restarted at once up to this many times a minute; after that, with growing pauses
MAX_PAUSE_S = 30.0  # a child that keeps dying (a bad checkpoint, memory) is retried at least this often


STATUS_FD_ENV = "CODREAMER_STATUS_FD"  # in a child: the pipe it reports its status on
READY = "ready"


def report_status(status: str) -> None:
    """In a supervised child: tells the parent that it serves (READY) or why not; a no-op in a process started
    otherwise."""
    fd = os.environ.get(STATUS_FD_ENV)
    if fd is None:
        return
    try:
        os.write(int(fd), status.replace("\n", " ").encode(errors="replace")[:1000] + b"\n")
    except (OSError, ValueError):
        pass  # the parent is gone: the child follows it soon


def status_env(write_fd: int) -> dict[str, str]:
    """The environment of a child that reports on `write_fd` (pass it in `pass_fds` too)."""
    return os.environ | {STATUS_FD_ENV: str(write_fd)}


class SupervisedChild:
    """Subclasses name the child (`what`, for logs and readiness) and start it (`_launch`, given the pipe it reports
    its status on); call `_start` once."""

    what = "child process"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._starts: list[float] = []
        self._child: subprocess.Popen | None = None
        self._paused_until: float | None = None
        self._status = "starting"

    def _launch(self, status_fd: int) -> subprocess.Popen:
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
            status = self._status
            return None if status == READY else f"the {self.what} is not serving: {status}"
        return (f"the {self.what} exited {len(self._starts)} times in a minute; it is restarted in "
                f"{max(0.0, paused_until - time.monotonic()):.0f} s")

    def _start(self) -> None:
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        """Starts the child (with `_lock` held) and a thread that watches it."""
        self._starts = [t for t in self._starts if time.monotonic() - t < 60] + [time.monotonic()]
        read_fd, write_fd = os.pipe()
        try:
            child = self._launch(write_fd)
        finally:
            os.close(write_fd)  # the child holds the only write end: the pipe ends when it does
        self._child, self._status = child, "starting"
        threading.Thread(target=self._supervise, args=(child, read_fd), name=self.what, daemon=True).start()

    def _supervise(self, child: subprocess.Popen, status_fd: int) -> None:
        self._handed_over(child)
        with open(status_fd, "rb") as statuses:
            for line in statuses:
                with self._lock:
                    if child is self._child:
                        self._status = line.decode(errors="replace").strip() or "starting"
        code = child.wait()
        with self._lock:
            if child is self._child:
                self._status = f"exited with code {code}"
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
