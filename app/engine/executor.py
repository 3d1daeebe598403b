"""What a worker process holds to execute runs: backends, the judge, each run's model and client.

DBOS steps are module functions, so the workflow reaches the worker's executor through
`current()`; `app.lifecycle.worker.start` installs it before DBOS launches.
"""

import asyncio
from collections.abc import Callable

import art

from app.backends.embedded import EmbeddedBackend
from app.backends.embedded.repository import DatabaseCheckpoints
from app.backends.registry import create_backend, create_model, judge_endpoint
from app.backends.retry import retrying
from app.core import Services
from app.engine.outcome_watch import OutcomeWatch
from app.kit.settings import Settings
from app.loop.generation import Policy
from app.loop.reward import Judge


def create_judge(settings: Settings, embedded: EmbeddedBackend, name: str = "default") -> Judge:
    """The judge a run names (see `judge_endpoint`), with the configured retries."""
    endpoint = judge_endpoint(settings, embedded, name)
    return Judge(endpoint.model, endpoint.params, settings.judge_retries, context_tokens=endpoint.context_tokens)


class Executor:
    def __init__(self, services: Services, wake_relay: Callable[[], None] = lambda: None):
        self.services = services
        self.settings = services.settings
        self.wake_relay = wake_relay
        self.outcome_watch = OutcomeWatch(services.db)  # wakes the runs here that wait for outcomes
        self.embedded = EmbeddedBackend(store=DatabaseCheckpoints(services.db))
        self.judge: Judge = create_judge(self.settings, self.embedded)
        self._judges: dict[str, Judge] = {"default": self.judge}
        self._backends: dict[str, art.Backend | None] = {}
        self._policies: dict[str, Policy] = {}
        self._registering: dict[str, asyncio.Lock] = {}

    def judge_named(self, name: str | None) -> Judge:
        """The judge a run names (None: the default), built once per worker."""
        name = name or "default"
        if name not in self._judges:
            self._judges[name] = create_judge(self.settings, self.embedded, name)
        return self._judges[name]

    def backend(self, name: str) -> art.Backend | None:
        if name not in self._backends:
            self._backends[name] = create_backend(name, self.settings, self.embedded)
        return self._backends[name]

    async def policy(self, run_id: str, backend_name: str) -> Policy:
        """The run's model and client, registered (checkpoints loaded) on first use in this process, once.

        A pipelined stage's steps ask at once (a resumed run's first stage: its email, training and generation):
        the first registers and the others wait for it. Two registrations of one model each loaded the
        checkpoints, and the later one replaced the list a training step had just added its step to, so the
        next iteration trained that step again."""
        if (policy := self._policies.get(run_id)) is not None:
            return policy
        async with self._registering.setdefault(run_id, asyncio.Lock()):
            if (policy := self._policies.get(run_id)) is not None:
                return policy
            model = create_model(backend_name, self.settings, run_id)
            backend = self.backend(backend_name)
            if backend is not None:
                async for attempt in retrying(self.settings.backend_retries):
                    with attempt:
                        await model.register(backend)
            policy = self._policies[run_id] = Policy.of(
                model, max_retries=self.settings.backend_retries, timeout=self.settings.model_timeout_s
            )
            return policy

    async def release(self, run_id: str) -> None:
        """Drops what this process holds for a run (its client, its checkpoints in memory); idempotent."""
        policy = self._policies.pop(run_id, None)
        self._registering.pop(run_id, None)
        if policy is not None:
            if isinstance(policy.model, art.TrainableModel):
                self.embedded.forget(policy.model)
            await policy.client.close()

    def holds(self, run_id: str) -> bool:
        return run_id in self._policies

    async def close(self) -> None:
        await self.outcome_watch.close()
        for run_id in list(self._policies):
            await self.release(run_id)
        for backend in {self.embedded, *self._backends.values()} - {None}:  # embedded: the judge's, if no run's
            await backend.close()


_current: Executor | None = None


def install(executor: Executor | None) -> None:
    global _current
    _current = executor


def current() -> Executor:
    if _current is None:
        raise RuntimeError("this process does not execute runs (no worker started)")
    return _current
