"""Generation: K rollouts per scenario against the policy's endpoint, each group scored as soon as it is complete."""

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.request import getproxies, proxy_bypass

import aiohttp
import art
import httpx
import numpy as np
import openai
from httpx_aiohttp import AiohttpTransport
from openai import AsyncOpenAI

from app.agent.prompt import initial_messages
from app.agent.schemas import ScenarioContext
from app.agent.tools import TOOLS
from app.kit.observability import traced
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores
from app.knowledge_graph.schemas import Scenario
from app.loop.exploration import Exploration
from app.loop.reward import Scorer, has_signal, rollout_seed
from app.loop.rollout import rollout
from app.loop.schemas import EndReason, RunConfig
from app.loop.trajectory import EmailTrajectory


class _Transport(AiohttpTransport):
    """httpx-aiohttp reports every broken connection (refused, reset, closed by the server) as a connect timeout: the
    OpenAI client retries it alike, but would tell a user whose model server is down that it timed out."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise
            raise httpx.ConnectError(str(exc), request=request) from exc.__cause__


def environment_proxy(base_url: str) -> httpx.Proxy | None:
    """HTTPS_PROXY (or HTTP_PROXY) for a model's URL unless NO_PROXY exempts its host, as httpx reads them; read once,
    as aiohttp's own `trust_env` would look it up (and `.netrc`) in a thread on every request."""
    url = httpx.URL(base_url)
    if proxy_bypass(url.host):
        return None
    proxy = getproxies().get(url.scheme)
    return httpx.Proxy(proxy) if proxy else None


def http_client(base_url: str) -> httpx.AsyncClient:
    """The policy's keep-alive connections, pooled by aiohttp under httpx's interface (the OpenAI SDK's own aiohttp
    option). httpx's own pool polls every pooled socket on each request and each response's end, so its CPU a request
    grows with the requests in flight (a worker drafting two chunks has 50): 8 ms of CPU a request at 50 in flight
    against 3 with aiohttp, on this machine."""
    return httpx.AsyncClient(
        transport=_Transport(proxy=environment_proxy(base_url),
                             client=lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))),
        follow_redirects=True)


EXPLORATION_STREAM = 1  # the exploration draw's random stream, apart from the policy's (seeded with the rollout's seed)


@dataclass
class Policy:
    """Where rollouts get their completions: the model's OpenAI-compatible endpoint."""

    model: art.Model
    client: AsyncOpenAI
    step: int | None = None  # a pinned checkpoint; None: the latest

    @classmethod
    def of(cls, model: art.Model, max_retries: int = 3, timeout: float = 120.0) -> "Policy":
        """The OpenAI client retries timeouts, connection errors, 429 and 5xx with exponential backoff and jitter."""
        client = AsyncOpenAI(
            base_url=model.inference_base_url, api_key=model.inference_api_key, max_retries=max_retries, timeout=timeout,
            http_client=http_client(model.inference_base_url),
        )
        return cls(model, client)

    def at(self, step: int) -> "Policy":
        """The same policy pinned to one checkpoint, so rollouts that overlap training all sample from the step they
        record, not from whichever checkpoint is newest when each turn is sent."""
        return dataclasses.replace(self, step=step)

    @property
    def model_name(self) -> str:
        """The pinned or latest checkpoint, by ART's naming convention for the backend."""
        return self.model.get_inference_name(self.step)

    @property
    def logprobs(self) -> bool:
        return self.model.trainable



class PreflightFailed(Exception):
    """The model server refused what the run will ask of it, or did not answer."""


async def preflight(policy: Policy, graph: KnowledgeGraph, scenario: Scenario, config: RunConfig) -> None:
    """A rollout's first turn, sent once when the run starts, through the same client with the same options
    (tools, `max_tokens`, `seed`, and `logprobs` only when the backend trains on them): a server that rejects
    any of them, or the model's name, fails the run at its start with the server's own message."""
    try:
        await policy.client.chat.completions.create(
            model=policy.model_name, messages=initial_messages(graph, scenario, NodeScores(), config.max_turns), tools=TOOLS,
            max_tokens=config.max_tokens_per_turn, seed=0, logprobs=policy.logprobs,
        )
    except openai.APIStatusError as exc:
        said = exc.body.get("message") if isinstance(exc.body, dict) else None  # the server's own words, when it sent JSON
        raise PreflightFailed(f"the model server refused the run's first request ({exc.status_code}): {said or exc.message}") from None
    except openai.APIError as exc:
        raise PreflightFailed(f"the model server did not answer the run's first request ({type(exc).__name__}): {exc}") from None


@dataclass
class Generation:
    groups: list[art.TrajectoryGroup]  # of EmailTrajectory
    metrics: dict[str, float]



@traced
async def generate(
    policy: Policy,
    graph: KnowledgeGraph,
    scenarios: list[Scenario],
    scores: Mapping[str, Mapping[str, float]],
    config: RunConfig,
    *,
    iteration: int,
    contexts: Mapping[str, ScenarioContext] | None = None,
    concurrency: int,
    score: Scorer,
    max_exception_fraction: float = 0.25,
    exploration: Exploration | None = None,
) -> Generation:
    """K rollouts per scenario, each with its scenario's node scores (and context, when learning in context), seen
    through a draw of `exploration` when the run explores; each group is scored as soon as it is complete."""
    started = time.monotonic()
    limit = asyncio.Semaphore(concurrency)
    counts = {"exceptions": 0, "dropped_groups": 0}
    rollouts_per_group = config.rollouts_per_group

    async def one(scenario: Scenario, index: int) -> EmailTrajectory:
        seed = rollout_seed(config.seed, iteration, scenario.id, index)
        shown, focus = (None, None) if exploration is None else exploration.shown_scores(
            scenario, scores[scenario.id], (seed, EXPLORATION_STREAM))
        async with limit:
            trajectory = await rollout(
                policy.client, policy.model_name, graph, scenario, scores[scenario.id], max_turns=config.max_turns,
                seed=seed, logprobs=policy.logprobs, rollout_index=index,
                context=(contexts or {}).get(scenario.id), max_tokens=config.max_tokens_per_turn, shown_scores=shown,
                focus=focus,
            )
        if exploration is not None and trajectory.email is not None:
            explored = exploration.unsent(trajectory.email.citations)
            trajectory.metadata |= {"explore_focus": focus, "explored_citations": ",".join(explored)}
            trajectory.metrics["explored_citations"] = float(len(explored))
        return trajectory

    async def after_each(group: art.TrajectoryGroup) -> art.TrajectoryGroup | None:
        counts["exceptions"] += len(group.exceptions)
        group.trajectories.sort(key=lambda t: t.rollout)  # completion order is not reproducible
        scored = await score(group) if len(group.trajectories) > 1 else None
        counts["dropped_groups"] += scored is None
        return scored

    groups = await art.gather_trajectory_groups(
        (art.TrajectoryGroup(one(s, k) for k in range(rollouts_per_group)) for s in scenarios),
        pbar_desc=None,
        max_exceptions=max(1, int(max_exception_fraction * rollouts_per_group * len(scenarios))),
        after_each=after_each,
    )
    trajectories = [t for g in groups for t in g.trajectories]
    metrics = {
        "rollouts": float(rollouts_per_group * len(scenarios)),
        "rollout_exceptions": float(counts["exceptions"]),
        "exception_rate": counts["exceptions"] / (rollouts_per_group * len(scenarios)),
        "dropped_groups": float(counts["dropped_groups"]),
        "finalized_fraction": float(np.mean([t.email is not None for t in trajectories])) if trajectories else 0.0,
        **{f"end/{reason.value}": float(sum(t.end_reason == reason for t in trajectories)) for reason in EndReason},
        "corrections": float(sum(t.corrections for t in trajectories)),
        "json_turns": float(sum(t.json_turns for t in trajectories)),
        "mean_turns": float(np.mean([t.turns for t in trajectories])) if trajectories else 0.0,
        "zero_variance_fraction": float(np.mean([not has_signal(g) for g in groups])) if groups else 0.0,
        **({"explored_fraction": float(np.mean([t.metrics.get("explored_citations", 0.0) > 0 for t in trajectories]))
            if trajectories else 0.0} if exploration is not None else {}),
        "judge/latency_s": float(np.mean([t.metrics.get("judge_latency_s", 0.0) for t in trajectories])) if trajectories else 0.0,
        "judge/cost_usd": float(sum(t.metrics.get("judge_cost_usd", 0.0) for t in trajectories)),
        "duration/generate_and_score_s": time.monotonic() - started,
    }
    return Generation(groups, metrics)
