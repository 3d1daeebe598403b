"""Loopback stand-ins for remote services that cannot be reached from here, speaking their real
protocols over real HTTP: the W&B Training API that `art.ServerlessBackend` calls, OpenAI-compatible
models and judges that misbehave, and webhook receivers (healthy, dripping, or answering 50 MB).

Each is a `LoopbackStandIn`: one server on a free loopback port, run by a daemon thread of the
test process, stopped by `close()` (or by leaving a `with` block)."""

import asyncio
import json
import re
import secrets
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from app.backends.embedded.policy import Checkpoint
from app.backends.embedded.server import LoopbackServer, policy_turn


class LoopbackStandIn:
    """A server on a free loopback port, in a daemon thread of this process.

    `server` is an ASGI app (served by uvicorn: the JSON APIs) or a `BaseHTTPRequestHandler` class
    (served by `http.server`: for receivers that write the bytes on the wire themselves).
    """

    def __init__(self, server: FastAPI | type[BaseHTTPRequestHandler]):
        if isinstance(server, type) and issubclass(server, BaseHTTPRequestHandler):
            self._http = ThreadingHTTPServer(("127.0.0.1", 0), server)
            self.port = self._http.server_address[1]
            threading.Thread(target=self._http.serve_forever, daemon=True).start()
            self._asgi = None
        else:
            self._http = None
            self._asgi = LoopbackServer(server)
            self._asgi.start()
            self.port = self._asgi.port

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """Where an OpenAI-compatible client points."""
        return f"{self.origin}/v1"

    def close(self) -> None:
        if self._asgi is not None:
            self._asgi.stop()
        else:
            self._http.shutdown()
            self._http.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WandbTrainingStandIn(LoopbackStandIn):
    """Models, checkpoints, training jobs with their events, and chat completions (the embedded policy)."""

    def __init__(self, api_key: str):
        self.api_key = api_key
        self.models: dict[str, dict] = {}
        self.checkpoints: dict[str, list[dict]] = {}
        self.training_jobs: list[dict] = []
        self.inference_models: list[str] = []
        self.policy = Checkpoint.initial()
        app = FastAPI()

        @app.middleware("http")
        async def authenticate(request: Request, call_next):
            if request.headers.get("authorization") != f"Bearer {self.api_key}":
                return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
            return await call_next(request)

        @app.post("/v1/preview/models")
        async def create_model(body: dict) -> dict:
            key = f"{body['project']}/{body['name']}"
            if key not in self.models:
                self.models[key] = {"id": f"mdl_{secrets.token_hex(4)}", "entity": body.get("entity") or "codreamer-test",
                                    "project": body["project"], "name": body["name"], "base_model": body["base_model"],
                                    "run_id": None}
                self.checkpoints[self.models[key]["id"]] = []
            return self.models[key]

        @app.get("/v1/preview/models/{model_id}/checkpoints")
        async def list_checkpoints(model_id: str, order: str = "asc", limit: int = 100, after: str | None = None) -> dict:
            items = sorted(self.checkpoints[model_id], key=lambda c: c["step"], reverse=order == "desc")
            if after:
                items = items[[c["id"] for c in items].index(after) + 1:]
            return {"data": items[:limit], "has_more": len(items) > limit}

        @app.delete("/v1/preview/models/{model_id}/checkpoints")
        async def delete_checkpoints(model_id: str, request: Request) -> dict:
            steps = set((await request.json())["steps"])
            before = self.checkpoints[model_id]
            self.checkpoints[model_id] = [c for c in before if c["step"] not in steps]
            return {"deleted_count": len(before) - len(self.checkpoints[model_id]), "not_found_steps": []}

        @app.post("/v1/preview/training-jobs")
        async def create_training_job(body: dict) -> dict:
            job = {"id": f"job_{len(self.training_jobs) + 1}", **body}
            self.training_jobs.append(job)
            checkpoints = self.checkpoints[body["model_id"]]
            step = max((c["step"] for c in checkpoints), default=0) + 1
            checkpoints.append({"id": f"ckpt_{step}", "step": step, "metrics": {}})
            return {"id": job["id"]}

        @app.get("/v1/preview/training-jobs/{job_id}/events")
        async def job_events(job_id: str, after: str | None = None) -> dict:
            job = next(j for j in self.training_jobs if j["id"] == job_id)
            n = sum(len(g["trajectories"]) for g in job["trajectory_groups"])
            events = [
                {"id": "e1", "type": "training_started", "data": {"num_sequences": n}},
                {"id": "e2", "type": "gradient_step", "data": {"loss": 0.1, "grad_norm": 1.0}},
                {"id": "e3", "type": "training_ended", "data": {}},
            ]
            if after:
                events = events[[e["id"] for e in events].index(after) + 1:]
            return {"data": events, "has_more": False}

        @app.post("/v1/chat/completions")
        async def chat(body: dict) -> dict:
            self.inference_models.append(body["model"])
            message, tokens = policy_turn(self.policy, body)
            return {
                "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls",
                             "logprobs": {"content": tokens} if body.get("logprobs") else None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": len(tokens), "total_tokens": 1 + len(tokens)},
            }

        super().__init__(app)


class UnreliableJudge(LoopbackStandIn):
    """An OpenAI-compatible judge that answers RULER requests badly, in a fixed rotation."""

    BEHAVIOURS = ("out_of_range", "malformed", "wrong_count", "good")

    def __init__(self, behaviours: tuple[str, ...] = BEHAVIOURS):
        self.calls: list[str] = []
        self.prompts: list[str] = []
        self.formats: list[dict | None] = []  # each request's response_format
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(body: dict) -> dict:
            behaviour = behaviours[len(self.calls) % len(behaviours)]
            self.calls.append(behaviour)
            self.prompts.append(json.dumps(body["messages"]))
            self.formats.append(body.get("response_format"))
            ids = re.findall(r'<trajectory id="([^"]+)">', body["messages"][-1]["content"])
            scores = [{"trajectory_id": i, "explanation": "ok", "score": 0.2 + 0.1 * n} for n, i in enumerate(ids)]
            if behaviour == "out_of_range":
                scores = [{**s, "score": 7.0 if n % 2 else -3.0} for n, s in enumerate(scores)]
            content = {
                "malformed": "Sure! Here are the scores: {scores: [1, 2",
                "wrong_count": json.dumps({"scores": scores[:1] + scores}),
            }.get(behaviour, json.dumps({"scores": scores}))
            return {
                "id": "chatcmpl-judge", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }

        super().__init__(app)


class SwitchableProxy(LoopbackStandIn):
    """An OpenAI-compatible endpoint that forwards to another one, or answers 503 while `down`."""

    def __init__(self, upstream: str):
        self.down = False
        self.refused = 0
        app = FastAPI()

        @app.api_route("/v1/{path:path}", methods=["GET", "POST"])
        async def forward(path: str, request: Request):
            if self.down:
                self.refused += 1
                return JSONResponse({"error": {"message": "model server overloaded", "type": "server_error"}}, status_code=503)
            async with httpx.AsyncClient() as client:
                upstream_response = await client.request(
                    request.method, f"{upstream}/{path}", content=await request.body(),
                    headers={k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")},
                )
            return Response(upstream_response.content, upstream_response.status_code, media_type="application/json")

        super().__init__(app)


class HangingModel(LoopbackStandIn):
    """An OpenAI-compatible endpoint that answers only after `delay` seconds."""

    def __init__(self, delay: float):
        self.calls = 0
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(body: dict) -> dict:
            self.calls += 1
            await asyncio.sleep(delay)
            return {"error": "too late"}

        super().__init__(app)


class RecordingModel(LoopbackStandIn):
    """A fixed (untrainable) OpenAI-compatible chat model that records every request it receives.

    It answers with the embedded policy's untrained checkpoint, which acts only on what the
    conversation shows it, as a hosted model would.
    """

    def __init__(self):
        self.requests: list[dict] = []
        self.policy = Checkpoint.initial()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(body: dict) -> dict:
            self.requests.append(body)
            message, _ = policy_turn(self.policy, body)
            return {
                "id": "chatcmpl-recorded", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls", "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

        super().__init__(app)


class ScriptedTextModel(LoopbackStandIn):
    """An OpenAI-compatible chat model that answers each turn from a script, as small real models did: text where a
    tool call belongs, a tool call written as JSON, an email written out, an answer cut at the token limit. Each
    entry is (content, finish_reason), or a tool call {"name", "arguments"} sent as a proper one. With
    `rejects_tool_choice` it answers 400 to a named `tool_choice`, with `rejects` to any request that sets that
    field, and with `context_chars` to messages longer than that, as some servers do. A request with a
    `response_format` gets `structured` (content, finish_reason) when given, else the script's turn."""

    def __init__(self, script: list, rejects_tool_choice: bool = False, rejects: str | None = None,
                 context_chars: int | None = None, structured: tuple[str, str] | None = None):
        self.requests: list[dict] = []
        app = FastAPI()

        def refuse(message: str) -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": "invalid_request_error"}}, status_code=400)

        @app.post("/v1/chat/completions")
        async def chat(body: dict):
            self.requests.append(body)
            if rejects_tool_choice and isinstance(body.get("tool_choice"), dict):
                return refuse("tool_choice must be 'auto' or 'none'")
            if rejects is not None and body.get(rejects) is not None and body.get(rejects) is not False:
                return refuse(f"unsupported parameter: {rejects}")
            if context_chars is not None and len(json.dumps(body["messages"])) > context_chars:  # llama-server's words
                return refuse("request (4153 tokens) exceeds the available context size (4096 tokens), try increasing it")
            turn = script[min(sum(m["role"] == "assistant" for m in body["messages"]), len(script) - 1)]
            if structured is not None and body.get("response_format"):
                turn = structured
            if isinstance(turn, dict):
                message = {"role": "assistant", "content": None, "tool_calls": [{
                    "id": f"call_{len(self.requests)}", "type": "function",
                    "function": {"name": turn["name"], "arguments": json.dumps(turn["arguments"])}}]}
                finish = "tool_calls"
            else:
                message, finish = {"role": "assistant", "content": turn[0]}, turn[1]
            return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

        super().__init__(app)


class Receiver(LoopbackStandIn):
    """A webhook receiver on loopback; `answer(n)` gives (status, delay seconds) for the n-th request."""

    def __init__(self, answer=lambda n: (200, 0.0)):
        self.answer = answer
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
                with receiver._lock:
                    n = len(receiver.requests)
                    status, delay = receiver.answer(n)
                    receiver.requests.append({"headers": dict(self.headers), "body": body, "status": status, "at": time.time(),
                                              "path": self.path})
                time.sleep(delay)
                self.send_response(status)
                if status in (301, 302, 307):
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        super().__init__(Handler)
        self.url = f"{self.origin}/hooks"

    def delivered(self) -> list[dict]:
        """Requests answered 2xx, as (headers, parsed body)."""
        with self._lock:
            return [r for r in self.requests if 200 <= r["status"] < 300]


class DripReceiver(LoopbackStandIn):
    """Answers every POST one byte per `interval` seconds (81 bytes: 81 s at 1 s), on loopback."""

    ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 16\r\n\r\n" + b"x" * 16

    def __init__(self, interval: float = 1.0):
        self.requests: list[dict] = []
        self._lock, self._stop = threading.Lock(), threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                request = {"id": self.headers.get("webhook-id"), "at": time.time(), "ended": None}
                with receiver._lock:
                    receiver.requests.append(request)
                try:
                    for byte in receiver.ANSWER:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if receiver._stop.wait(interval):
                            break
                except OSError:  # the sender hung up (its deadline)
                    pass
                request["ended"] = time.time()
                self.close_connection = True

            def log_message(self, *args):
                pass

        super().__init__(Handler)
        self.url = f"{self.origin}/hooks"

    def per_event(self) -> Counter:
        with self._lock:
            return Counter(r["id"] for r in self.requests)

    def close(self) -> None:
        self._stop.set()
        super().close()


class HugeAnswerReceiver(LoopbackStandIn):
    """Answers every POST with `status` and a 50 MB body, sent as fast as the client takes it."""

    BODY_BYTES = 50 * 1024 * 1024
    CHUNK = 64 * 1024

    def __init__(self, status: int):
        self.sent: list[int] = []  # per request: body bytes the kernel accepted before the client hung up
        self.done = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, receiver.CHUNK)  # little in flight

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(status)
                self.send_header("content-type", "application/octet-stream")
                self.send_header("content-length", str(receiver.BODY_BYTES))
                self.end_headers()
                sent, chunk = 0, b"x" * receiver.CHUNK
                try:
                    while sent < receiver.BODY_BYTES:
                        self.wfile.write(chunk)
                        sent += len(chunk)
                except OSError:  # the relay hung up
                    pass
                receiver.sent.append(sent)
                receiver.done.set()
                self.close_connection = True

            def log_message(self, *args):
                pass

        super().__init__(Handler)
        self.url = f"{self.origin}/hooks"
