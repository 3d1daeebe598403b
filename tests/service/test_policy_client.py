"""The policy's OpenAI client (`Policy.of`): aiohttp's keep-alive pool under httpx's interface."""

import asyncio

import art
import openai
from aiohttp import web

from app.loop.generation import Policy

ANSWER = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [
    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}]}


def policy_at(base_url: str) -> Policy:
    return Policy.of(art.Model(name="m", project="p", inference_base_url=base_url, inference_api_key="k"),
                     max_retries=0, timeout=5)


async def test_requests_in_flight_reuse_their_connections():
    peers: set[tuple] = set()

    async def complete(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername"))
        assert (await request.json())["model"] == "m"
        await asyncio.sleep(0.05)
        return web.json_response(ANSWER)

    server = web.Application()
    server.router.add_post("/v1/chat/completions", complete)
    runner = web.AppRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    policy = policy_at(f"http://127.0.0.1:{port}/v1")
    try:
        for _ in range(3):  # three waves of 20 at once: the later ones on the first wave's connections
            answers = await asyncio.gather(*(policy.client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]) for _ in range(20)))
            assert [a.choices[0].message.content for a in answers] == ["hello"] * 20
        assert len(peers) == 20
    finally:
        await policy.client.close()
        await runner.cleanup()


async def test_a_refused_connection_is_a_connection_error_not_a_timeout():
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()  # nothing listens there any more
    policy = policy_at(f"http://127.0.0.1:{port}/v1")
    try:
        try:
            await policy.client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.APIConnectionError as exc:
            assert not isinstance(exc, openai.APITimeoutError), exc
        else:
            raise AssertionError("a request to a closed port succeeded")
    finally:
        await policy.client.close()


def test_the_environments_proxy_is_read_once_for_the_models_host(monkeypatch):
    from app.loop.generation import environment_proxy

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert environment_proxy("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert str(environment_proxy("https://api.example.com/v1").url) == "http://proxy.internal:3128"
    assert environment_proxy("http://127.0.0.1:8000/v1") is None  # exempt
    assert environment_proxy("http://api.example.com/v1") is None  # HTTPS_PROXY is for https URLs only
