"""Idempotent creation (`Idempotency-Key`): a repeated key with the same request answers what the first request
created, a repeated key with another request is a 409, and two requests racing with one key store one thing."""

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from app.kit.errors import Conflict

T = TypeVar("T")


def request_hash(body: BaseModel) -> str:
    """What a key is checked against: the fields the request set, canonically."""
    fields = body.model_dump(mode="json", exclude_unset=True)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_same_request(key: str, stored: str | None, digest: str) -> None:
    if stored != digest:
        raise Conflict(f"Idempotency-Key {key!r} was already used with a different request body")


async def create_once(key: str | None, replay: Callable[[], Awaitable[T | None]], create: Callable[[], Awaitable[T]],
                      what: str) -> tuple[T, bool]:
    """What `create` made (False), or what an earlier request with the key made (True). `create` stores the key with
    what it makes, under a unique constraint: the loser of a race with one key gets the winner's."""
    if key and (replayed := await replay()) is not None:
        return replayed, True
    try:
        return await create(), False
    except IntegrityError:
        replayed = await replay() if key else None
        if replayed is None:
            raise Conflict(f"the {what} could not be stored as it was validated; retry") from None
        return replayed, True
