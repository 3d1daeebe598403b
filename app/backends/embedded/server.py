"""OpenAI-compatible Chat Completions on loopback, serving the policy's checkpoints and the judge."""

import json
import secrets
import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.backends.embedded.judge import judge
from app.backends.embedded.policy import Checkpoint, plan_turn, sampler, score_decisions
from app.agent.text import words
from app.agent.transcript import parse_transcript

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


def build_app(resolve: Callable[[str], Checkpoint], api_key: str, model_names: Callable[[], list[str]]) -> FastAPI:
    app = FastAPI(title="CoDreamer embedded model server", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_key(request: Request, call_next):
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return _error(401, "invalid API key")
        return await call_next(request)

    @app.get("/v1/models")
    async def list_models() -> dict:
        names = [JUDGE_MODEL_NAME, *model_names()]
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
                content = json.dumps(judge(body["messages"]))
                message = {"role": "assistant", "content": content}
                return _completion(model, message, "stop", prompt_tokens, None)
            checkpoint = resolve(model)
            if not body.get("tools"):
                return _error(400, "the embedded policy acts only through the agent's tools; pass 'tools'")
            message, tokens = policy_turn(checkpoint, body)
            return _completion(model, message, "tool_calls", prompt_tokens, tokens if body.get("logprobs") else None)
        except ModelNotFound as exc:
            return _error(404, str(exc))
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"cannot read this conversation: {exc}")

    return app


class LoopbackServer:
    """Runs an ASGI app with uvicorn on a free loopback port in its own thread.

    A thread of its own keeps it serving whichever event loops its callers use, and stopping
    it only ends the thread, never the host process.
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
