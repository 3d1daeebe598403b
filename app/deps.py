"""FastAPI dependencies: services, sessions and API-key authentication."""

import secrets
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import Services, services

_bearer = HTTPBearer(auto_error=False, description="One of the API_KEYS, when that setting is non-empty.")


def get_services() -> Services:
    return services()


ServicesDep = Annotated[Services, Depends(get_services)]


async def read_session(svc: ServicesDep) -> AsyncIterator[AsyncSession]:
    async with svc.db.read() as session:
        yield session


ReadSession = Annotated[AsyncSession, Depends(read_session)]


async def require_api_key(
    svc: ServicesDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    keys = svc.settings.api_keys
    if not keys:
        return
    token = credentials.credentials if credentials and credentials.scheme.lower() == "bearer" else ""
    if not any(secrets.compare_digest(token.encode(), key.encode()) for key in keys):
        raise HTTPException(401, "missing or invalid API key: send 'Authorization: Bearer <key>'",
                            headers={"WWW-Authenticate": "Bearer"})


def not_found(what: str) -> HTTPException:
    return HTTPException(404, f"{what} not found")
