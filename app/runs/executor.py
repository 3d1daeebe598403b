"""What a worker process needs to execute runs: the backend, its judge and each run's model."""

from app.backends.embedded import EmbeddedBackend
from app.backends.embedded.repository import DatabaseCheckpoints
from app.db import Database
from app.loop.runtime import create_judge, create_model
from app.loop.steps import Policy
from app.settings import Settings


class Executor:
    def __init__(self, settings: Settings, db: Database):
        self.settings = settings
        self.backend = EmbeddedBackend(store=DatabaseCheckpoints(db))
        self.judge = create_judge(settings, self.backend)
        self._policies: dict[str, Policy] = {}

    async def policy(self, run_id: str) -> Policy:
        """The run's model and client, registered (checkpoints loaded from the database) on first use here."""
        policy = self._policies.get(run_id)
        if policy is None:
            model = create_model(self.settings, run_id)
            await model.register(self.backend)
            policy = self._policies[run_id] = Policy.of(model)
        return policy

    async def forget(self, run_id: str) -> None:
        policy = self._policies.pop(run_id, None)
        if policy is not None:
            self.backend.forget(policy.model)
            await policy.client.close()

    async def close(self) -> None:
        for run_id in list(self._policies):
            await self.forget(run_id)
        await self.backend.close()
