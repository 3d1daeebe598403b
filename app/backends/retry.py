"""Bounded retries with exponential backoff and jitter for transient backend failures (tenacity)."""

import httpx
import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential


def is_transient(exc: BaseException) -> bool:
    """Connection trouble, timeouts, rate limits, 5xx, and a serverless training job that failed to run."""
    if isinstance(exc, (httpx.TransportError, openai.APIConnectionError, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, RuntimeError) and str(exc).startswith("Training job failed")


def retrying(retries: int, *, max_wait: float = 30.0) -> AsyncRetrying:
    return AsyncRetrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_random_exponential(multiplier=0.5, max=max_wait),
        retry=retry_if_exception(is_transient),
        reraise=True,
    )
