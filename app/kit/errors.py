"""The errors any layer may raise for a request it refuses; the HTTP edge answers each with its status.

Domain code raises these instead of mapping its own exceptions to status codes route by route:
`app.http.errors` turns every one into `{"detail": message}` with the status (and headers) it carries.
"""

from collections.abc import Mapping

from fastapi.exceptions import RequestValidationError


class ServiceError(Exception):
    """A refusal the caller can act on; `status_code` says which kind, `headers` go with the answer."""

    status_code: int

    def __init__(self, detail: str, headers: Mapping[str, str] | None = None):
        super().__init__(detail)
        self.detail = detail
        self.headers = dict(headers or {})


class BadRequest(ServiceError):
    """The request cannot be read at all (a body that is not JSON text, say)."""

    status_code = 400


class Unauthorized(ServiceError):
    """A credential other than the API key (an email provider's signature) is missing, wrong or stale."""

    status_code = 401


class NotFound(ServiceError):
    """No such thing, or not the caller's (a tenant learns nothing about another's ids)."""

    status_code = 404


class Conflict(ServiceError):
    """The request is valid but the current state refuses it (a finished run, a graph in use, a reused key)."""

    status_code = 409


class TooManyRequests(ServiceError):
    """A quota is full; `Retry-After` says when to ask again."""

    status_code = 429

    def __init__(self, detail: str, retry_after_s: int):
        super().__init__(detail, headers={"Retry-After": str(retry_after_s)})


def invalid(field: str | None, message: str) -> RequestValidationError:
    """A 422 in the shape of every validation error, naming the body field (or the body) that is wrong."""
    return RequestValidationError([{"loc": ("body", field) if field else ("body",), "msg": message, "type": "value_error"}])
