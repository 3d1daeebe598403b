"""`EmbeddedBackend`: satisfies `art.Backend`, so the loop drives it exactly like ART's own backends.

The policy, the judge and GRPO run in the embedded model server, a child process started with the
backend (`app.backends.embedded.process`); this class keeps the record of which checkpoints
exist, persists them through the `CheckpointStore`, and asks the server over loopback HTTP.
"""

import asyncio
import base64
import json
import logging
import secrets
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

import httpx
from art import TrainableModel, Trajectory, TrajectoryGroup, dev
from art.types import TrainResult, TrainSFTConfig

from app.backends.embedded.policy import DEFAULT_LEARNING_RATE
from app.backends.embedded.process import ModelServerProcess
from app.backends.embedded.server import JUDGE_MODEL_NAME

MODEL_SERVER_NICENESS = 10  # the API comes first; runs get every cycle it leaves
log = logging.getLogger("codreamer")


class CheckpointStore(Protocol):
    """Where checkpoints outlive the process (the database, in the service)."""

    async def load(self, model_name: str) -> dict[int, bytes]: ...

    async def save(self, model_name: str, step: int, data: bytes, metrics: dict[str, float]) -> None: ...

    async def delete(self, model_name: str, steps: list[int]) -> None: ...


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _train_body(name: str, step: int, groups: list[TrajectoryGroup], config: dict) -> bytes:
    """What the model server trains on: each trajectory's reward and messages, as JSON."""
    trajectories = [[t.model_dump(mode="json", include={"reward", "messages_and_choices"}) for t in g.trajectories] for g in groups]
    return json.dumps({"model": name, "step": step, "config": config, "groups": trajectories}).encode()


class EmbeddedBackend:
    """A NumPy policy per registered model, one checkpoint per training step, served by a child process."""

    judge_model_name = JUDGE_MODEL_NAME

    def __init__(self, store: CheckpointStore | None = None, *, niceness: int = MODEL_SERVER_NICENESS) -> None:
        self._store = store
        self._niceness = niceness
        # What the model server serves: model name → step → checkpoint bytes, each saved before it is
        # added. A restarted server is handed all of it.
        self._checkpoints: dict[str, dict[int, bytes]] = {}
        self._state_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._api_key = secrets.token_urlsafe(24)
        self._process: ModelServerProcess | None = None
        self._clients: list[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = []
        self._forgetting: dict[str, asyncio.Task] = {}

    # -- serving

    @property
    def base_url(self) -> str:
        return f"{self._ensure_process().url}/v1"

    @property
    def api_key(self) -> str:
        return self._api_key

    def _ensure_process(self) -> ModelServerProcess:
        """Starts the model server on first use: a bound socket and a spawned child, no waiting."""
        with self._start_lock:
            if self._process is None:
                self._process = ModelServerProcess(self._api_key, self._served_state, nice=self._niceness)
            return self._process

    def _served_state(self) -> dict[str, dict[str, str]]:
        with self._state_lock:
            return {name: {str(step): _b64(data) for step, data in steps.items()} for name, steps in self._checkpoints.items()}

    def _client(self) -> httpx.AsyncClient:
        """One client per event loop (a client's connections belong to the loop that opened them)."""
        loop = asyncio.get_running_loop()
        self._clients = [(lp, c) for lp, c in self._clients if not lp.is_closed()]
        for lp, client in self._clients:
            if lp is loop:
                return client
        client = httpx.AsyncClient(
            base_url=self._ensure_process().url, headers={"Authorization": f"Bearer {self._api_key}"},
            timeout=httpx.Timeout(600, connect=30), trust_env=False,
        )
        self._clients.append((loop, client))
        return client

    async def _call(self, operation: str, body: dict | bytes) -> dict:
        """One internal operation. Each is idempotent (the server only trains, and replaces what it
        holds), so a connection lost to a restarting server is simply tried again."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        for delay in (0.1, 0.5, None):
            try:
                response = await self._client().post(
                    f"/internal/{operation}", content=content, headers={"Content-Type": "application/json"}
                )
                break
            except (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                if delay is None:
                    raise
                await asyncio.sleep(delay)
        if response.status_code >= 500:
            response.raise_for_status()  # transient for the loop's retries
        if response.status_code >= 400:
            raise ValueError(f"embedded model server: {response.json()['error']['message']}")
        return response.json()

    def problem(self) -> str | None:
        """Why the model server cannot answer now, for readiness; None while it is up (or not started yet)."""
        process = self._process
        return process.problem() if process is not None else None

    async def server_pid(self) -> int:
        """The model server's process id, as it reports it."""
        return (await self._call("health", {}))["pid"]

    def forget(self, model: Any) -> None:
        """Drops a finished run's checkpoints from the model server (the store keeps them)."""
        with self._state_lock:
            known = self._checkpoints.pop(model.name, None)
        if known is None or self._process is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to ask from: the server holds them until it stops, and serves nobody with them
        name = model.name
        task = loop.create_task(self._forget(name))
        self._forgetting[name] = task
        task.add_done_callback(lambda t: self._forgetting.pop(name) if self._forgetting.get(name) is t else None)

    async def _forget(self, name: str) -> None:
        try:
            await self._call("forget", {"model": name})
        except Exception as exc:  # the server may be stopping; it frees them then anyway
            log.debug("embedded model server did not forget %s: %s", name, exc)

    # -- art.Backend

    def _model_inference_name(self, model: Any, step: int | None = None) -> str:
        steps = self._checkpoints.get(model.name) or {0: None}
        return f"{model.name}@{max(steps) if step is None else step}"

    async def close(self) -> None:
        """Stops the model server: terminated, then killed if it has not exited within 5 s."""
        with self._start_lock:
            process, self._process = self._process, None
        clients, self._clients = self._clients, []
        for loop, client in clients:
            if loop is asyncio.get_running_loop():
                await client.aclose()
        if process is not None:
            await asyncio.to_thread(process.stop)

    async def register(self, model: Any) -> None:
        forgetting = self._forgetting.get(model.name)
        if forgetting is not None and forgetting.get_loop() is asyncio.get_running_loop():
            await forgetting  # a forget sent before must not land after this register
        if model.name in self._checkpoints:
            return
        saved = await self._store.load(model.name) if self._store else {}
        answer = await self._call("register", {"model": model.name, "checkpoints": {str(s): _b64(d) for s, d in saved.items()}})
        created = {int(step): base64.b64decode(data) for step, data in answer["created"].items()}
        if created and self._store:
            await self._store.save(model.name, 0, created[0], {})
        with self._state_lock:
            self._checkpoints[model.name] = saved or created

    async def _get_step(self, model: Any) -> int:
        return max(self._steps(model))

    async def _delete_checkpoint_files(self, model: Any, steps_to_keep: list[int]) -> None:
        steps = self._steps(model)
        keep = set(steps_to_keep) | {0, max(steps)}  # step 0 is the KL reference
        doomed = [s for s in steps if s not in keep]
        if not doomed:
            return
        if self._store:
            await self._store.delete(model.name, doomed)
        await self._call("delete", {"model": model.name, "steps": doomed})
        with self._state_lock:
            for step in doomed:
                steps.pop(step, None)

    async def _prepare_backend_for_training(
        self, model: Any, config: dev.OpenAIServerConfig | None
    ) -> tuple[str, str]:
        process = await asyncio.to_thread(self._ensure_process)
        return f"{process.url}/v1", self._api_key

    async def train(
        self,
        model: TrainableModel,
        trajectory_groups: Iterable[TrajectoryGroup],
        *,
        learning_rate: float = DEFAULT_LEARNING_RATE,
        scale_rewards: bool = True,
        epsilon: float = 0.2,
        epsilon_high: float | None = None,
        kl_penalty_coef: float = 0.0,
        epochs: int = 2,
        **unsupported: Any,
    ) -> TrainResult:
        """One GRPO step on every group with reward variance; checkpoints the result as step + 1."""
        if unsupported:
            raise TypeError(f"the embedded backend does not support {sorted(unsupported)}")
        steps = self._steps(model)
        step = max(steps)
        config = {"learning_rate": learning_rate, "scale_rewards": scale_rewards, "epsilon": epsilon,
                  "epsilon_high": epsilon_high, "kl_penalty_coef": kl_penalty_coef, "epochs": epochs}
        body = await asyncio.to_thread(_train_body, model.name, step, list(trajectory_groups), config)
        answer = await self._call("train", body)  # the server trains; it serves the result only once added
        data, metrics = base64.b64decode(answer["checkpoint"]), answer["metrics"]
        if self._store:  # durable before it is visible: a crash never serves an unsaved step
            await self._store.save(model.name, step + 1, data, metrics)
        await self._call("checkpoints", {"model": model.name, "checkpoints": {str(step + 1): answer["checkpoint"]}})
        with self._state_lock:
            steps[step + 1] = data
        return TrainResult(step=step + 1, metrics=metrics)

    def _train_sft(
        self,
        model: Any,
        trajectories: Iterable[Trajectory],
        config: TrainSFTConfig,
        dev_config: dev.TrainSFTConfig,
        verbose: bool = False,
    ) -> AsyncIterator[dict[str, float]]:
        raise NotImplementedError("the embedded backend trains with GRPO only; SFT needs an LLM backend")

    def _steps(self, model: Any) -> dict[int, bytes]:
        try:
            return self._checkpoints[model.name]
        except KeyError:
            raise ValueError(f"model {model.name!r} is not registered with this backend") from None
