"""FastAPI dependencies every domain may use: the database, settings, sessions, the tenant, API-key docs."""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.db import Database
from app.kit.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="One of the API_KEYS, when that setting is non-empty.")


# Async dependencies: a sync one would cost a thread-pool hop per request. The lifespan puts the
# process's services (app.core.Services) on app.state; these read only the part a route needs.
async def get_database(request: Request) -> Database:
    return request.app.state.services.db


DatabaseDep = Annotated[Database, Depends(get_database)]


async def get_request_settings(request: Request) -> Settings:
    return request.app.state.services.settings


SettingsDep = Annotated[Settings, Depends(get_request_settings)]


async def read_session(db: DatabaseDep) -> AsyncIterator[AsyncSession]:
    async with db.read() as session:
        yield session


ReadSession = Annotated[AsyncSession, Depends(read_session)]


async def get_tenant(request: Request) -> str:
    """The caller's tenant, which `app.kit.auth.ApiKeyAuth` put in the request's state."""
    return request.state.tenant


TenantDep = Annotated[str, Depends(get_tenant)]


async def api_key_scheme(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    """Documents the bearer scheme in OpenAPI; `ApiKeyAuth` enforces it, before the body is read."""


def _query_names(dependant) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def reject_unknown_query_params(request: Request) -> None:
    """A misspelt parameter is an error, not a silently ignored filter."""
    route = request.scope.get("route")
    if route is None:
        return
    unknown = sorted(set(request.query_params) - _query_names(route.dependant))
    if unknown:
        raise RequestValidationError(
            [{"loc": ("query", name), "msg": "unknown query parameter", "type": "extra_forbidden"} for name in unknown]
        )


class ErrorOut(BaseModel):
    detail: str


UNAUTHORIZED = {401: {"model": ErrorOut, "description": "Missing or invalid API key (when API_KEYS is set)"}}
NOT_FOUND = {404: {"model": ErrorOut, "description": "Unknown id"}}
BODY_ERRORS = {
    400: {"model": ErrorOut, "description": "The body is not JSON text (bad encoding, or nested too deeply)"},
    413: {"model": ErrorOut, "description": "Request body over the size limit"},
}
