"""The embedded model server's process, as the service sees it: started, watched and stopped.

Like vLLM beside ART's LocalBackend, the policy, the judge and GRPO run in a process of their
own (`python -m app.backends.embedded.server`), so their CPU work never holds the API's
interpreter lock. The service binds the loopback socket and hands it down: the URL is known at
once, and requests made while the child is still importing wait in the socket's backlog, so
starting it never blocks. The child reads its key and the checkpoints to serve from a pipe on its
stdin and exits when that pipe closes (its parent died, even by `kill -9`) or it is re-parented.
"""

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

log = logging.getLogger("codreamer")

RESTARTS_PER_MINUTE = 3  # restarted at once up to this many times a minute; after that, with growing pauses
MAX_PAUSE_S = 30.0  # a server that keeps dying (a bad checkpoint, memory) is retried at least this often, never given up


class ModelServerProcess:
    """One child process serving on a socket bound here; restarted (with `state()`) if it dies."""

    def __init__(self, api_key: str, state: Callable[[], dict[str, dict[str, str]]], *, nice: int = 0):
        self._api_key, self._state, self._nice = api_key, state, nice
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(2048)
        self.port = self._socket.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = threading.Event()
        self._starts: list[float] = []
        self._child: subprocess.Popen | None = None
        self._paused_until: float | None = None
        with self._lock:
            self._spawn()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def problem(self) -> str | None:
        """Why the server cannot answer now (it keeps dying and waits before its next start), or None."""
        paused_until = self._paused_until
        if paused_until is None:
            return None
        return (f"the embedded model server exited {len(self._starts)} times in a minute; it is restarted in "
                f"{max(0.0, paused_until - time.monotonic()):.0f} s")

    def _spawn(self) -> None:
        """Starts a child on the socket (with `_lock` held); a thread hands it its setup and waits on it."""
        self._starts = [t for t in self._starts if time.monotonic() - t < 60] + [time.monotonic()]
        fd = self._socket.fileno()
        child = subprocess.Popen(
            [sys.executable, "-m", "app.backends.embedded.server", "--fd", str(fd)],
            stdin=subprocess.PIPE, pass_fds=(fd,),
            # Its own process group, so a terminal's Ctrl-C reaches only the service, which stops it
            # in turn; the same session, so its niceness counts against the service's own CPU share.
            process_group=0,
        )
        setup = {"api_key": self._api_key, "parent_pid": os.getpid(), "nice": self._nice, "checkpoints": self._state()}
        self._child = child
        threading.Thread(target=self._supervise, args=(child, json.dumps(setup).encode() + b"\n"),
                         name="embedded-model-server", daemon=True).start()

    def _supervise(self, child: subprocess.Popen, setup: bytes) -> None:
        try:  # a pipe holds 64 KiB: many checkpoints wait until the child reads them, so not on the event loop
            child.stdin.write(setup)
            child.stdin.flush()
        except (OSError, ValueError):
            pass  # it died, or was stopped, already; wait() says so
        code = child.wait()
        with self._lock:
            if self._closed or child is not self._child:
                return
            starts = len([t for t in self._starts if time.monotonic() - t < 60])
            pause = 0.0 if starts <= RESTARTS_PER_MINUTE else min(MAX_PAUSE_S, 2.0 ** (starts - RESTARTS_PER_MINUTE))
            if not pause:
                log.error("embedded model server exited with code %s; restarting it", code)
                self._spawn()
                return
            log.error("embedded model server exited with code %s, %d times in a minute; restarting it in %.0f s",
                      code, starts, pause)
            self._paused_until = time.monotonic() + pause  # requests wait in the socket's backlog meanwhile
        if self._stopping.wait(pause):
            return
        with self._lock:
            self._paused_until = None
            if not self._closed and child is self._child:
                self._spawn()

    def stop(self, timeout: float = 5.0) -> None:
        """Terminates the child, kills it after `timeout`, and closes the socket. Blocks: run it in a thread."""
        with self._lock:
            self._closed = True
            self._stopping.set()
            child, self._child = self._child, None
        if child is not None:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            try:
                child.stdin.close()
            except (OSError, ValueError):
                pass
        self._socket.close()
