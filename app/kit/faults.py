"""Fault points for fault-injection tests and drills; unset in normal operation.

`CRASH_AT=<point>[:<iteration>]` kills the process (and the `serve` that started it) with SIGKILL (no shutdown code runs) when a
run reaches that point: inside a step, after its work and before DBOS records the step done,
which is the window a real crash would find hardest. `FAIL_AT=<point>[:<iteration>][,…]` raises
`InjectedFault` there instead. Points: start, email, generate, score, train, reweight, publish,
finish, and fail (recording a failure).

`LATENCY_AT=<kind>:<seconds>[,…]` makes the embedded model server answer that much later, as a hosted backend
would: `model` (each policy turn), `judge` (each judge call), `train` (each GRPO step, during which it keeps
serving). For benchmarks of how the loop overlaps work it waits on (`python -m bench pipelining`).
"""

import asyncio
import os
import signal

from app.kit.worker_process import crash_service


class InjectedFault(RuntimeError):
    """Raised at a FAIL_AT point."""


def _at(variable: str, point: str, iteration: int | None) -> bool:
    wanted = os.environ.get(variable, "").split(",")
    return point in wanted or f"{point}:{iteration}" in wanted


def fault_point(point: str, iteration: int | None = None) -> None:
    if _at("CRASH_AT", point, iteration):
        crash_service()  # a worker that `serve` started takes the API down first: the machine crashed
        os.kill(os.getpid(), signal.SIGKILL)
    if _at("FAIL_AT", point, iteration):
        raise InjectedFault(f"injected failure at {point}" + ("" if iteration is None else f":{iteration}"))


async def injected_latency(kind: str) -> None:
    for entry in filter(None, os.environ.get("LATENCY_AT", "").split(",")):
        name, _, seconds = entry.partition(":")
        if name == kind:
            await asyncio.sleep(float(seconds))
