"""The body checks on their own: the size limit whatever the app behind it does with the error, and
the JSON checks' excerpts (see tests/service/test_input_hardening.py for the app that uses them)."""

import json

import httpx

from app.http.errors import excerpt
from app.http.middleware import BodyLimit, json_body_errors
from app.kit.settings import Settings
from tests.support import chunked


async def test_the_limit_is_a_413_whatever_the_reader_makes_of_it():
    """A reader that swallows the error and answers 400 (as FastAPI's body parser did) still yields the 413."""
    async def swallowing(scope, receive, send):
        try:
            while (await receive()).get("more_body"):
                pass
            status = 200
        except Exception:
            status = 400
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"from the app"})

    app = BodyLimit(swallowing, Settings(_env_file=None, max_body_bytes=1024))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        response = await http.post("/x", content=chunked(b"x" * 5000))
        assert response.status_code == 413 and response.json()["detail"] == "request body exceeds 1024 bytes"
        assert (await http.post("/x", content=chunked(b"x" * 1000))).text == "from the app"


def test_excerpt_is_json_safe_and_short():
    assert excerpt({"a": 1}) == {"a": 1} and excerpt([1, "b"]) == [1, "b"] and excerpt(3) == 3 and excerpt(None) is None
    assert excerpt(float("nan")) == "NaN" and excerpt(float("-inf")) == "-Infinity"
    assert excerpt("\ud800x") == "\\ud800x" and excerpt({"k": "\ud800"}) == '{"k": "\\ud800"}'
    assert excerpt("x" * 1000) == "x" * 200 + "…" and len(excerpt(list(range(10**6)))) == 201
    assert excerpt(10**400).startswith("<an integer") and excerpt(ValueError("bad")) == "bad"
    json.dumps(excerpt({"n": float("inf")}), allow_nan=False)


def test_json_body_errors_costs_nothing_for_ordinary_bodies():
    assert json_body_errors(b'{"a": [1.5, "x", {"b": null}], "s": "NaN", "e": "\\u00e9"}') == []
    assert json_body_errors(b"{not json") == [] and json_body_errors(b"[" * 100_000) == []
    deep = b'{"a": ' * 5000 + b"NaN" + b"}" * 5000  # too deep for json.loads: left to the route's parser (400)
    assert json_body_errors(deep) == []
