"""Idempotent creation: the first request creates, a replay answers what it made, a lost race answers the winner's."""

import pytest
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from app.kit.errors import Conflict
from app.kit.idempotency import check_same_request, create_once, request_hash


class Body(BaseModel):
    name: str
    size: int = 1


async def test_a_key_creates_once_and_a_lost_race_answers_the_winners():
    stored: dict[str, str] = {}

    async def replay():
        return stored.get("k")

    async def create():
        stored["k"] = "first"
        return "first"

    assert await create_once("k", replay, create, "thing") == ("first", False)
    assert await create_once("k", replay, create, "thing") == ("first", True)

    async def race_lost():  # the winner stored it between our replay and our insert
        stored["k2"] = "winner"
        raise IntegrityError("insert", {}, Exception("unique"))

    assert await create_once("k2", lambda: replay_of("k2", stored), race_lost, "thing") == ("winner", True)


async def replay_of(key, stored):
    return stored.get(key)


async def test_an_integrity_error_without_a_replay_is_a_conflict_saying_to_retry():
    async def nothing():
        return None

    async def fails():
        raise IntegrityError("insert", {}, Exception("foreign key"))

    with pytest.raises(Conflict, match="the batch could not be stored as it was validated; retry"):
        await create_once(None, nothing, fails, "batch")


def test_a_key_binds_the_fields_the_request_set():
    assert request_hash(Body(name="a")) == request_hash(Body(name="a"))
    assert request_hash(Body(name="a")) != request_hash(Body(name="a", size=1))  # set, though equal to the default
    check_same_request("k", request_hash(Body(name="a")), request_hash(Body(name="a")))
    with pytest.raises(Conflict, match="Idempotency-Key 'k' was already used with a different request body"):
        check_same_request("k", request_hash(Body(name="a")), request_hash(Body(name="b")))
