"""Every error answer of the API in one shape, `{"detail": ...}`, decided here once.

- a `ServiceError` any layer raised: its status, message and headers;
- a validation error: FastAPI's list, but each input echoed as a short excerpt, never a whole upload;
- the framework's HTTP errors: as FastAPI answers them, with a 405 listing every method of the path;
- the database away or busy: 503 with Retry-After, since nothing was applied;
- a client that left before its request body was read: nothing logged (no one is there to read the answer);
- anything else: 500, logged, and no internals in the answer.
"""

import json
import logging
import math
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import compile_path

from app.kit.db import is_transient
from app.kit.errors import ServiceError

log = logging.getLogger("codreamer")
RETRY_AFTER_S = 5  # after a database outage

EXCERPT_CHARS = 200  # of each offending input a validation error echoes
MAX_ERRORS = 50  # validation errors listed in one answer
SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(text: str) -> str:
    """The text with lone surrogates written as escapes (they cannot be encoded to UTF-8)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if SURROGATE.search(text) else text


def excerpt(value, limit: int = EXCERPT_CHARS):
    """A JSON-safe stand-in for an input a validation error echoes: the value when it is short,
    else the start of its JSON text. Never more than about `limit` characters, however large the
    input (only that much of it is ever serialized)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 256 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
    if isinstance(value, str):
        return _printable(value if len(value) <= limit else value[:limit] + "…")
    if isinstance(value, (bytes, bytearray)):
        return _printable(bytes(value[: limit * 4]).decode("utf-8", "replace")[:limit] + ("…" if len(value) > limit else ""))
    if isinstance(value, BaseException):
        return excerpt(str(value), limit)
    replaced = False

    def default(obj):
        nonlocal replaced
        replaced = True
        return obj.model_dump() if isinstance(obj, BaseModel) else str(obj)

    text, truncated = "", False
    try:  # the pure-Python encoder yields as it goes: a large input is serialized only up to the limit
        for chunk in json.JSONEncoder(ensure_ascii=False, default=default).iterencode(value):
            text += chunk
            if len(text) > limit:
                text, truncated = text[:limit] + "…", True
                break
    except (TypeError, ValueError):
        return _printable(repr(value)[:limit])
    if not truncated and not replaced and not SURROGATE.search(text) and not re.search(r"NaN|Infinity", text):
        return value
    return _printable(text)


def validation_details(errors) -> list[dict]:
    """Errors as FastAPI lists them (type, loc, msg, input, ctx), each input cut to an excerpt and
    made JSON-safe (NaN, lone surrogates), at most MAX_ERRORS of them."""
    details = []
    for error in list(errors)[:MAX_ERRORS]:
        detail = {"type": error.get("type", "value_error"),
                  "loc": [part if isinstance(part, int) else excerpt(str(part)) for part in error.get("loc", ())],
                  "msg": excerpt(str(error.get("msg", "")), 500)}
        if "input" in error:
            detail["input"] = excerpt(error["input"])
        if error.get("ctx"):
            detail["ctx"] = {str(key): excerpt(value) for key, value in error["ctx"].items()}
        details.append(detail)
    if len(errors) > MAX_ERRORS:
        details.append({"type": "too_many_errors", "loc": [], "msg": f"{len(errors) - MAX_ERRORS} more errors not listed"})
    return details


def route_methods(app: FastAPI) -> list[tuple[re.Pattern, frozenset[str]]]:
    """Each route's full-path pattern and methods, routes of included routers too."""
    try:  # recent FastAPI keeps included routers nested in app.routes
        from fastapi.routing import iter_route_contexts
        routes = list(iter_route_contexts(app.routes))
    except ImportError:  # older FastAPI lists every route flat
        routes = app.routes
    return [(compile_path(route.path)[0], frozenset(route.methods))
            for route in routes if getattr(route, "methods", None) and getattr(route, "path", None)]


def install_handlers(app: FastAPI) -> None:
    """Registers the handlers that shape every error answer of `app`."""

    @app.exception_handler(ServiceError)
    async def refused(request: Request, exc: ServiceError) -> JSONResponse:
        """What a domain refused, with the status its error class carries."""
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """As FastAPI's 422, but each input is echoed as a short excerpt, never a whole upload."""
        return JSONResponse({"detail": validation_details(exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """As FastAPI's, but a 405 lists every method of the path, not just the first route's."""
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allowed = {m for pattern, methods in route_methods(app) if pattern.match(request.url.path) for m in methods}
            headers["Allow"] = ", ".join(sorted(allowed))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    async def database_trouble(request: Request, exc: Exception) -> JSONResponse:
        """The database is away or busy: 503 and come back, never a 500 (nothing was applied)."""
        if not is_transient(exc):
            return await unexpected(request, exc)
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"detail": "the database is unavailable; retry shortly (nothing was applied)"},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(ClientDisconnect)
    async def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        """The client hung up (or was cut off, see app/kit/serving.py) mid-body: not the server's error, and any
        stranger can cause it, so it leaves no log line; the answer reaches no one."""
        return JSONResponse({"detail": "the client disconnected before its request was read"}, status_code=400)

    for error in (SQLAlchemyError, ConnectionError, TimeoutError):  # handled here, not re-raised to the server
        app.add_exception_handler(error, database_trouble)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": "internal error; the request was not applied"}, status_code=500)
