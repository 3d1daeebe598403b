"""The two ASGI middlewares that guard every request before a route reads it.

`BodyLimit` bounds what is read; `StrictInput` refuses what no database column can hold. Both answer
in the API's error shape (`app.http.errors`).
"""

import json
import math
import re
from urllib.parse import parse_qsl

from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app.http.errors import MAX_ERRORS, SURROGATE, validation_details
from app.kit.settings import Settings

_INBOUND = re.compile(r"/outcomes/hooks/[^/]+/inbound(?:/mime)?")  # replies: their own limit, MAX_INBOUND_BYTES
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")  # \ud800-\udfff or \u0000 escaped in JSON text


class BodyLimit:
    """Refuses bodies over the limit with 413 (graph uploads, draft batches and inbound messages get their own limits).

    A declared Content-Length over the limit is refused before anything is read. A chunked body
    is counted as it arrives: once it passes the limit the answer is the 413, whatever the code
    reading the body made of the error (FastAPI's parser turns it into a 400, for one).
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"].rstrip("/")
        upload = path == "/graphs" or (scope.get("method") == "PUT" and path.startswith("/graphs/") and path.count("/") == 2)
        limit = self.settings.max_graph_bytes if upload else self.settings.max_body_bytes
        if path == "/drafts" and scope.get("method") == "POST":  # up to 1,000 prospects: MAX_DRAFTS_BYTES
            limit = self.settings.max_drafts_bytes
        what = "request body"
        if _INBOUND.fullmatch(path):  # an email, attachments included: MAX_INBOUND_BYTES
            limit, what = self.settings.max_inbound_bytes, "inbound message"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await self._refuse(send, limit, what)
        received, too_large, started, refused = 0, False, False, False

        async def limited_receive():
            nonlocal received, too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                too_large = True
                raise _TooLarge(limit)
            return message

        async def guarded_send(message) -> None:
            nonlocal started, refused
            if refused:
                return  # the rest of the app's own answer to the too-large body
            if too_large and not started and message["type"] == "http.response.start":
                refused = True
                return await self._refuse(send, limit, what)
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not started and not refused:
                await self._refuse(send, limit, what)

    @staticmethod
    async def _refuse(send: Send, limit: int, what: str = "request body") -> None:
        setting = " (MAX_INBOUND_BYTES); nothing was stored" if what == "inbound message" else ""
        response = JSONResponse({"detail": f"{what} exceeds {limit} bytes{setting}"}, status_code=413)
        await response({"type": "http"}, None, send)


class _TooLarge(StarletteHTTPException):
    """An HTTPException, so that FastAPI's body parser re-raises it instead of answering 400."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body exceeds {limit} bytes")


class _NonFinite(str):
    """A NaN, Infinity or overflowing number met while parsing, kept as its text to be reported."""


def json_body_errors(body: bytes) -> list[dict]:
    """What no JSON column or text column can hold, in a JSON body: NaN and Infinity (and numbers
    that overflow to them), lone UTF-16 surrogates and NUL characters, each with its field path.
    [] when there is none, or when the body is not JSON at all (the route's parser says so)."""
    flagged = False

    def constant(name: str):
        nonlocal flagged
        flagged = True
        return _NonFinite(name)

    def number(text: str):
        nonlocal flagged
        value = float(text)
        if math.isfinite(value):
            return value
        flagged = True
        return _NonFinite(text)

    try:
        document = json.loads(body, parse_constant=constant, parse_float=number)
    except Exception:  # not JSON text: left to the route, which answers 400 or 422
        return []
    try:  # lone surrogates come either escaped or (decoded with surrogatepass) as bytes that are not UTF-8
        body.decode("utf-8")
        strings_suspect = _SUSPECT_ESCAPE.search(body) is not None
    except UnicodeDecodeError:
        strings_suspect = True
    if not flagged and not strings_suspect:
        return []
    errors: list[dict] = []

    def check_string(text: str, loc: tuple) -> None:
        if SURROGATE.search(text):
            errors.append({"type": "string_unicode", "loc": ("body", *loc), "input": text,
                           "msg": "Input should be a valid string: a lone UTF-16 surrogate (\\ud800-\\udfff) is not a character"})
        elif "\x00" in text:
            errors.append({"type": "string_pattern_mismatch", "loc": ("body", *loc), "input": text,
                           "msg": "String should not contain NUL characters (\\u0000)"})

    stack = [((), document)]  # depth-first in document order, iterative: as deep as the parser went
    while stack and len(errors) <= MAX_ERRORS:
        loc, item = stack.pop()
        if isinstance(item, _NonFinite):
            errors.append({"type": "finite_number", "loc": ("body", *loc), "input": str(item),
                           "msg": "Input should be a finite number (JSON has no NaN or Infinity)"})
        elif isinstance(item, str):
            check_string(item, loc)
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack += [((*loc, key), child), ((*loc, key), key)]  # the key is checked first
        elif isinstance(item, list):
            stack.extend(((*loc, index), child) for index, child in reversed(list(enumerate(item))))
    return errors


def _is_json(scope: Scope) -> bool:
    content_type = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
    return content_type == b"application/json" or (content_type.startswith(b"application/") and content_type.endswith(b"+json"))


class StrictInput:
    """Refuses, before any route sees it, what would reach the database as something it cannot store.

    - a NUL character (or a lone surrogate) in the path: 404 (no id contains one);
    - a NUL character in a query parameter: 422 naming it;
    - in a JSON body (up to MAX_BODY_BYTES, or MAX_DRAFTS_BYTES for a draft batch; larger graph uploads are parsed by their route, off the
      event loop), NaN, Infinity, numbers too large for a float, lone surrogates and NUL characters:
      422 naming each field. The body is read once, through BodyLimit, and handed on unchanged.
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.max_checked = max(settings.max_body_bytes, settings.max_drafts_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if "\x00" in scope["path"] or SURROGATE.search(scope["path"]):  # servers decode %ED%A0%80 to U+FFFD, but a raw scope may not
            return await JSONResponse({"detail": "not found: the path contains a NUL character or a lone surrogate"}, 404)(scope, receive, send)
        query = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            names = [name for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True) if "\x00" in name + value]
            errors = [{"type": "string_pattern_mismatch", "loc": ("query", name), "msg": "String should not contain NUL characters (\\u0000)"}
                      for name in names]
            if errors:
                return await JSONResponse({"detail": validation_details(errors)}, 422)(scope, receive, send)
        if not _is_json(scope):
            return await self.app(scope, receive, send)
        chunks, last = [], None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                last = message  # the client went away: the route learns it on its next receive
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and len(body) <= self.max_checked and (errors := json_body_errors(body)):
            return await JSONResponse({"detail": validation_details(errors)}, 422)(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return last or await receive()

        await self.app(scope, replay, send)
