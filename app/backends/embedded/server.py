"""The embedded model server: OpenAI-compatible Chat Completions for the policy's checkpoints and
the judge, plus the internal endpoints `EmbeddedBackend` drives (register, train, delete, forget).

It runs in a process of its own (`python -m app.backends.embedded.server`, started by
`app.backends.embedded.process`), so the policy, the judge and GRPO never hold the API's
interpreter lock. It listens on a loopback socket its parent bound and hands down, reads its key
and the checkpoints to serve from stdin, and exits when its parent goes away.
"""

import argparse
import asyncio
import base64
import json
import os
import secrets
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.agent.text import words
from app.agent.transcript import parse_transcript
from app.backends.embedded.grpo import group_samples, grpo_update
from app.backends.embedded.judge import judge
from app.backends.embedded.policy import Checkpoint, plan_turn, sampler, score_decisions
from app.kit import logs
from app.kit.faults import injected_latency
from app.kit.heap import freeze_startup_heap
from app.kit.supervision import READY, report_status

JUDGE_MODEL_NAME = "embedded-judge"


class ModelNotFound(LookupError):
    pass


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=status)


def _completion(model: str, message: dict, finish_reason: str, prompt_tokens: int, logprobs: list | None) -> dict:
    completion_tokens = len(logprobs) if logprobs is not None else words(message.get("content") or "")
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason,
                "logprobs": {"content": logprobs} if logprobs is not None else None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def policy_turn(checkpoint: Checkpoint, body: dict) -> tuple[dict, list[dict]]:
    """The assistant message for the next turn, and one logprob token per decision."""
    transcript = parse_transcript(body["messages"])
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    rng = None if temperature == 0 else np.random.default_rng(body.get("seed"))
    call, decisions = plan_turn(transcript, sampler(checkpoint.weights, rng))
    score_decisions(checkpoint.weights, decisions)
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{transcript.turns}_{call['name']}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
        ],
    }
    tokens = [
        {"token": d.label, "logprob": d.logprob, "bytes": list(d.label.encode()), "top_logprobs": []} for d in decisions
    ]
    return message, tokens


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode()


def decode(text: str) -> bytes:
    return base64.b64decode(text)


class Models:
    """The checkpoints this server holds, by model name and step. Its parent decides what they are:
    it registers them (from its checkpoint store), adds each trained step once saved, and deletes."""

    def __init__(self) -> None:
        self.steps: dict[str, dict[int, Checkpoint]] = {}

    def load(self, name: str, checkpoints: dict, *, replace: bool) -> None:
        loaded = {int(step): Checkpoint.from_bytes(decode(data)) for step, data in checkpoints.items()}
        if replace:
            self.steps[name] = loaded
        else:
            self.model(name).update(loaded)

    def model(self, name: str) -> dict[int, Checkpoint]:
        steps = self.steps.get(name)
        if steps is None:
            raise ModelNotFound(f"model {name!r} is not registered")
        return steps

    def served_names(self) -> list[str]:
        return [f"{name}@{step}" for name, steps in self.steps.items() for step in steps]

    def resolve(self, inference_name: str) -> Checkpoint:
        name, _, step = inference_name.partition("@")
        steps = self.model(name)
        if not step:
            return steps[max(steps)]
        if not step.isdigit() or int(step) not in steps:
            raise ModelNotFound(f"model {name!r} has no checkpoint {step!r}; available: {sorted(steps)}")
        return steps[int(step)]


def train_step(current: Checkpoint, reference: Checkpoint, groups: list[dict], config: dict) -> tuple[bytes, dict[str, float]]:
    """One GRPO step on JSON trajectory groups: the new checkpoint's bytes and the step's metrics."""
    started = time.monotonic()
    groups = [
        SimpleNamespace(trajectories=[SimpleNamespace(reward=t["reward"], messages_and_choices=t["messages_and_choices"]) for t in g])
        for g in groups
    ]
    samples, trained, skipped = group_samples(groups, config["scale_rewards"])
    epsilon = config["epsilon"]
    checkpoint, metrics = grpo_update(
        current, reference.weights, samples,
        learning_rate=config["learning_rate"], epsilon=epsilon,
        epsilon_high=epsilon if config["epsilon_high"] is None else config["epsilon_high"],
        kl_penalty_coef=config["kl_penalty_coef"], epochs=config["epochs"],
    )
    metrics |= {
        "groups_trained": float(trained),
        "groups_skipped": float(skipped),
        "trajectories": float(len(samples)),
        "learning_rate": config["learning_rate"],
        "time/step_trainer_s": time.monotonic() - started,
    }
    return checkpoint.to_bytes(), metrics


def build_app(models: Models, api_key: str) -> FastAPI:
    app = FastAPI(title="CoDreamer embedded model server", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_key(request: Request, call_next):
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return _error(401, "invalid API key")
        return await call_next(request)

    @app.get("/v1/models")
    async def list_models() -> dict:
        names = [JUDGE_MODEL_NAME, *models.served_names()]
        return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "codreamer"} for n in names]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list")
        model = str(body.get("model", ""))
        prompt_tokens = sum(words(json.dumps(m)) for m in body["messages"])
        try:
            if model == JUDGE_MODEL_NAME:
                await injected_latency("judge")
                content = json.dumps(judge(body["messages"]))
                message = {"role": "assistant", "content": content}
                return _completion(model, message, "stop", prompt_tokens, None)
            checkpoint = models.resolve(model)
            if not body.get("tools"):
                return _error(400, "the embedded policy acts only through the agent's tools; pass 'tools'")
            await injected_latency("model")
            message, tokens = policy_turn(checkpoint, body)
            return _completion(model, message, "tool_calls", prompt_tokens, tokens if body.get("logprobs") else None)
        except ModelNotFound as exc:
            return _error(404, str(exc))
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"cannot read this conversation: {exc}")

    # -- internal: what EmbeddedBackend asks of its model server (same key; never exposed beyond loopback)

    def internal(handler: Callable[[dict], object]):
        async def endpoint(request: Request):
            try:
                return await handler(await request.json())
            except ModelNotFound as exc:
                return _error(404, str(exc))
            except (ValueError, KeyError, TypeError) as exc:
                return _error(400, f"{type(exc).__name__}: {exc}")

        return endpoint

    async def health(_: dict) -> dict:
        return {"pid": os.getpid()}

    async def register(body: dict) -> dict:
        """Serves the model's saved checkpoints, or a fresh step 0 (returned, for the parent to save)."""
        if body["checkpoints"]:
            models.load(body["model"], body["checkpoints"], replace=True)
            return {"created": {}}
        initial = Checkpoint.initial()
        models.steps[body["model"]] = {0: initial}
        return {"created": {"0": encode(initial.to_bytes())}}

    async def add_checkpoints(body: dict) -> dict:
        models.load(body["model"], body["checkpoints"], replace=False)
        return {"steps": sorted(models.model(body["model"]))}

    async def steps(body: dict) -> dict:
        return {"steps": sorted(models.model(body["model"]))}

    async def train(body: dict) -> dict:
        """A new checkpoint from step `step`, returned but not served: the parent saves it first."""
        steps = models.model(body["model"])
        step = int(body["step"])
        if step not in steps or 0 not in steps:
            raise ModelNotFound(f"model {body['model']!r} has no checkpoint {step} (or no step 0) to train from")
        data, metrics = await asyncio.to_thread(train_step, steps[step], steps[0], body["groups"], body["config"])
        await injected_latency("train")
        return {"step": step + 1, "checkpoint": encode(data), "metrics": metrics}

    async def delete(body: dict) -> dict:
        steps = models.model(body["model"])
        for step in body["steps"]:
            steps.pop(int(step), None)
        return {"steps": sorted(steps)}

    async def forget(body: dict) -> dict:
        models.steps.pop(body["model"], None)
        return {}

    for name, handler in {"health": health, "register": register, "checkpoints": add_checkpoints, "steps": steps,
                          "train": train, "delete": delete, "forget": forget}.items():
        app.add_api_route(f"/internal/{name}", internal(handler), methods=["POST"], include_in_schema=False)

    return app


class LoopbackServer:
    """Runs an ASGI app with uvicorn on a free loopback port in a thread of the calling process.

    The test stand-ins and the orchestration benchmark serve their fakes with it; the embedded
    model server itself runs in a process of its own (`app.backends.embedded.process`).
    """

    def __init__(self, app: FastAPI):
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("embedded model server failed to start")
            time.sleep(0.005)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._socket.close()


# -- the child process


def _exit_with_parent(parent_pid: int, stdin) -> None:
    """Ends this process when its parent is gone: its end of our stdin closes, or we are re-parented."""
    while True:
        readable, _, _ = select.select([stdin], [], [], 1.0)
        if (readable and not os.read(stdin.fileno(), 4096)) or os.getppid() != parent_pid:
            os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the embedded model server (started by EmbeddedBackend)")
    parser.add_argument("--fd", type=int, required=True, help="a listening loopback socket inherited from the parent")
    args = parser.parse_args(argv)
    # The first line on stdin: the key, the parent's pid, the niceness and the checkpoints to serve.
    setup = json.loads(sys.stdin.buffer.readline() or b"null")
    if setup is None:
        return  # the parent went away before it could tell us anything
    threading.Thread(target=_exit_with_parent, args=(setup["parent_pid"], sys.stdin.buffer), daemon=True).start()
    if setup.get("nice"):
        os.nice(setup["nice"])
    models = Models()
    for name, checkpoints in setup["checkpoints"].items():
        models.load(name, checkpoints, replace=True)
    listener = socket.socket(fileno=args.fd)
    config = uvicorn.Config(
        build_app(models, setup["api_key"]), log_level="warning", lifespan="off", access_log=False,
        timeout_graceful_shutdown=2, backlog=2048,
    )
    logs.install()  # a request cut off by a shutdown is one quiet line, not a traceback
    freeze_startup_heap()
    server = uvicorn.Server(config)
    threading.Thread(target=_report_when_started, args=(server,), daemon=True).start()
    server.run(sockets=[listener])


def _report_when_started(server: uvicorn.Server) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.01)
    if server.started:
        report_status(READY)


if __name__ == "__main__":
    main()
