"""The embedded model server's process, as the service sees it: started, watched and stopped.

Like vLLM beside ART's LocalBackend, the policy, the judge and GRPO run in a process of their
own (`python -m app.backends.embedded.server`), so their CPU work never holds the API's
interpreter lock. The service binds the loopback socket and hands it down: the URL is known at
once, and requests made while the child is still importing wait in the socket's backlog, so
starting it never blocks. The child reads its key and the checkpoints to serve from a pipe on its
stdin and exits when that pipe closes (its parent died, even by `kill -9`) or it is re-parented.
"""

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from app.kit.supervision import SupervisedChild, status_env


class ModelServerProcess(SupervisedChild):
    """One child process serving on a socket bound here; restarted (with `state()`) if it dies."""

    what = "embedded model server"

    def __init__(self, api_key: str, state: Callable[[], dict[str, dict[str, str]]], *, nice: int = 0):
        super().__init__()
        self._api_key, self._state, self._nice = api_key, state, nice
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(2048)
        self.port = self._socket.getsockname()[1]
        self._start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _launch(self, status_fd: int) -> subprocess.Popen:
        fd = self._socket.fileno()
        return subprocess.Popen(
            [sys.executable, "-m", "app.backends.embedded.server", "--fd", str(fd)],
            stdin=subprocess.PIPE, pass_fds=(fd, status_fd), env=status_env(status_fd),
            # Its own process group, so a terminal's Ctrl-C reaches only the service, which stops it
            # in turn; the same session, so its niceness counts against the service's own CPU share.
            process_group=0,
        )

    def _handed_over(self, child: subprocess.Popen) -> None:
        """Its setup goes down its stdin here, in the watching thread: a pipe holds 64 KiB, and many checkpoints
        wait until the child reads them, so not on the event loop."""
        setup = {"api_key": self._api_key, "parent_pid": os.getpid(), "nice": self._nice, "checkpoints": self._state()}
        try:
            child.stdin.write(json.dumps(setup).encode() + b"\n")
            child.stdin.flush()
        except (OSError, ValueError):
            pass  # it died, or was stopped, already; wait() says so

    def stop(self, timeout: float = 5.0) -> None:
        """Terminates the child, kills it after `timeout`, and closes the socket. Blocks: run it in a thread."""
        self._stop(timeout)
        self._socket.close()
