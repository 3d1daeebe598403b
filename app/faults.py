"""Crash points for fault-injection tests and drills.

`CRASH_AT=<point>:<iteration>` kills the process with SIGKILL (no shutdown code runs) when a
run reaches that point: inside a step, after its work and before DBOS records the step done,
which is the window a real crash would find hardest. Points: generate, score, train, reweight,
email, publish. Unset in normal operation.
"""

import os
import signal


def crash_point(point: str, iteration: int) -> None:
    if os.environ.get("CRASH_AT") == f"{point}:{iteration}":
        os.kill(os.getpid(), signal.SIGKILL)
