"""What a worker process needs to execute runs: backends, the judge and each run's model."""

import art

from app.backends.embedded import EmbeddedBackend
from app.backends.embedded.repository import DatabaseCheckpoints
from app.backends.registry import create_backend, create_model
from app.backends.retry import retrying
from app.db import Database
from app.loop.runtime import create_judge
from app.loop.steps import Policy
from app.settings import Settings


class Executor:
    def __init__(self, settings: Settings, db: Database):
        self.settings = settings
        self.embedded = EmbeddedBackend(store=DatabaseCheckpoints(db))
        self.judge = create_judge(settings, self.embedded)
        self._backends: dict[str, art.Backend | None] = {"embedded": self.embedded}
        self._policies: dict[str, Policy] = {}

    def backend(self, name: str) -> art.Backend | None:
        if name not in self._backends:
            self._backends[name] = create_backend(name, self.settings)
        return self._backends[name]

    async def policy(self, run_id: str, backend_name: str) -> Policy:
        """The run's model and client, registered (checkpoints loaded) on first use in this process."""
        policy = self._policies.get(run_id)
        if policy is None:
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

    async def forget(self, run_id: str) -> None:
        policy = self._policies.pop(run_id, None)
        if policy is not None:
            if isinstance(policy.model, art.TrainableModel):
                self.embedded.forget(policy.model)
            await policy.client.close()

    async def close(self) -> None:
        for run_id in list(self._policies):
            await self.forget(run_id)
        for backend in self._backends.values():
            if backend is not None:
                await backend.close()
