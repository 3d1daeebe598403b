"""Conditional reads (RFC 9110 §13.1.2, §15.4.5): an entity tag for a version of a resource, and the 304 that a
matching `If-None-Match` gets, so a client polling an unchanged resource costs one small query and no body."""

import hashlib
from collections import OrderedDict
from typing import Annotated

from fastapi import Header, Response, status

IfNoneMatch = Annotated[str | None, Header(description="An `ETag` from an earlier answer: 304 while nothing changed.")]
NOT_MODIFIED = {304: {"description": "Nothing changed since the `ETag` sent in `If-None-Match`"}}


def entity_tag(*version: object) -> str:
    """A weak tag (the same meaning, not necessarily the same bytes) derived from what identifies the version."""
    return f'W/"{hashlib.blake2b(repr(version).encode(), digest_size=12).hexdigest()}"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """The weak comparison `If-None-Match` asks for: any listed tag, `W/` ignored. `*` (any version at all) is
    for writes; on a read it would answer 304 for what is not there, so it matches nothing here."""
    if not if_none_match:
        return False
    opaque = tag.removeprefix("W/")
    return any(candidate.strip().removeprefix("W/") == opaque for candidate in if_none_match.split(","))


def _headers(tag: str) -> dict[str, str]:
    """`no-cache`: a browser may keep the answer but asks again each time, with the tag (so a dashboard's plain
    fetch() polls conditionally); `private`: it is one tenant's."""
    return {"ETag": tag, "Cache-Control": "private, no-cache"}


def tag(response: Response, etag: str) -> None:
    response.headers.update(_headers(etag))


def not_modified(etag: str) -> Response:
    return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=_headers(etag))


class Rendered:
    """Answers already serialised, by entity tag: a version never changes, so its JSON can be sent again as bytes.

    Least recently used first out, within `max_bytes`; one per process (each API process serves its own)."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.size = max_bytes, 0
        self._bodies: OrderedDict[tuple, bytes] = OrderedDict()

    def get(self, key: tuple) -> bytes | None:
        body = self._bodies.get(key)
        if body is not None:
            self._bodies.move_to_end(key)
        return body

    def pop(self, key: tuple) -> None:
        body = self._bodies.pop(key, None)
        if body is not None:
            self.size -= len(body)

    def put(self, key: tuple, body: bytes) -> bytes:
        if len(body) <= self.max_bytes and key not in self._bodies:
            self._bodies[key] = body
            self.size += len(body)
            while self.size > self.max_bytes:
                self.size -= len(self._bodies.popitem(last=False)[1])
        return body
