"""Inbound replies are parsed in worker processes, never on the API's event loop, each within a time budget.

Parsing a reply is pure-Python CPU work (the email package, the reply cutter's regular expressions) on input any
sender of an email controls. On the event loop it stalls every tenant's requests (one 16 KB reply held the API 11 s,
and SIGTERM waited with it). A thread would free the loop but not bound the time: Python cannot stop a thread, so a
parse that runs away keeps a core, and the GIL it takes turn by turn, until it ends. A process can be stopped:
pebble's ProcessPool ends the worker whose task passes its timeout and starts a fresh one, and the request is answered
422 at once. The pool starts with the first inbound message a process receives (spawned: a clean interpreter that
imports only the parsers, app.outcomes.inbound and the providers' modules, not a fork of the API with its threads and
connections).
"""

import asyncio
import logging
import multiprocessing
import threading
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime

from pebble import ProcessExpired, ProcessPool

from app.outcomes import inbound
from app.outcomes.providers import read_inbound

log = logging.getLogger("codreamer")
QUEUED_PER_WORKER = 4  # messages waiting for a worker, per worker, before the next one is answered 429
RETRY_AFTER_S = 30


class Busy(Exception):
    """Every worker is busy and the queue is full: the provider should retry (providers retry any answer but 2xx)."""


def read_in_worker(content_type: str, body: bytes, domain: str, limits: inbound.Limits,
                   now: datetime | None = None) -> inbound.InboundReply | None:
    """`read_inbound` in a worker: any failure on the sender's input (an unforeseen parser error, a
    RecursionError, memory) comes back as a refusal naming its kind, never a traceback."""
    try:
        return read_inbound(content_type, body, domain=domain, now=now, limits=limits)
    except inbound.Refused:
        raise
    except (Exception, RecursionError, MemoryError) as exc:
        raise inbound.Refused(f"the message could not be read ({type(exc).__name__})") from None


def _quiet_worker() -> None:
    """A parser process logs nothing (python-multipart logs malformed forms at WARNING and ERROR): what went wrong
    comes back as a refusal, which the API answers, and logs where it is unexpected."""
    logging.disable(logging.CRITICAL)


class InboundParser:
    """A pool of `workers` processes that parse inbound messages; `read` awaits one's answer."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ProcessPool | None = None
        self._waiting = 0
        self._lock = threading.Lock()

    def _running_pool(self) -> ProcessPool:
        with self._lock:
            if self._pool is None or not self._pool.active:
                self._pool = ProcessPool(max_workers=self.workers, initializer=_quiet_worker,
                                         context=multiprocessing.get_context("spawn"))
                self._pool.active  # noqa: B018 (reading it starts the pool's workers, here rather than on first use)
            return self._pool

    async def read(self, content_type: str, body: bytes, *, domain: str, limits: inbound.Limits,
                   timeout_s: float) -> inbound.InboundReply | None:
        """The reply, None when the message is no reply; `inbound.Refused` when it cannot be read within `limits` or
        `timeout_s` seconds of a worker's time; `Busy` when too many messages are waiting already."""
        if self._waiting >= self.workers * (1 + QUEUED_PER_WORKER):
            raise Busy(f"{self._waiting} inbound messages are being parsed; retry in {RETRY_AFTER_S} s")
        self._waiting += 1
        try:
            pool = self._pool
            if pool is None or not pool.active:  # starting processes is work of its own: not on the loop either
                pool = await asyncio.to_thread(self._running_pool)
            try:
                future = pool.schedule(read_in_worker, args=(content_type, body, domain, limits), timeout=timeout_s)
            except RuntimeError:  # the pool broke, or was stopped, since it was looked at
                raise BrokenProcessPool from None
            return await asyncio.wrap_future(future)
        except TimeoutError:
            log.warning("an inbound message took longer than %g s to parse (INBOUND_PARSE_TIMEOUT_S): refused", timeout_s)
            raise inbound.Refused(f"the message could not be parsed within {timeout_s:g} s (INBOUND_PARSE_TIMEOUT_S); "
                                  "nothing was stored") from None
        except ProcessExpired as exc:
            log.warning("the inbound parser process ended (exit code %s) on a message: refused", exc.exitcode)
            raise inbound.Refused("the message could not be parsed (the parser process ended on it); "
                                  "nothing was stored") from None
        except BrokenProcessPool:  # its workers could not start, or it was stopped under the request (shutdown)
            log.warning("the inbound parser's pool is broken: the message is answered 429 (retry)")
            raise Busy(f"the inbound parser is unavailable; retry in {RETRY_AFTER_S} s") from None
        finally:
            self._waiting -= 1

    def close(self) -> None:
        """Stops the workers; a parse in progress is abandoned with them."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
            pool.join(timeout=10)


_parser: InboundParser | None = None


def parser(workers: int) -> InboundParser:
    """This process's parser (made on first use, with the first caller's number of workers)."""
    global _parser
    if _parser is None:
        _parser = InboundParser(workers)
    return _parser


async def shutdown() -> None:
    """Stops this process's parser, if it started one (the lifespan's end)."""
    global _parser
    current, _parser = _parser, None
    if current is not None:
        await asyncio.to_thread(current.close)
