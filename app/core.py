"""What every request and every run needs, built once at start-up; the lifespan puts it on `app.state`."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from app.events.signing import SecretBox
from app.events.stream import EventFeed
from app.kit.db import Database
from app.kit.settings import Settings
from app.knowledge_graph.service import GraphCache


@dataclass(frozen=True)
class Services:
    settings: Settings
    db: Database
    graphs: GraphCache
    secrets: SecretBox  # webhook secrets at rest
    feed: EventFeed  # live events: one poller per subject, shared by all of its streams
    # What this process needs besides the database to do its work (the embedded model server, in a
    # worker): each says why it cannot now, or None; readiness reports them.
    health: list[Callable[[], str | None]] = field(default_factory=list)


async def get_services(request: Request) -> Services:  # async: a sync dependency would cost a thread-pool hop per request
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
