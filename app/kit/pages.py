"""One shape for every list the API answers, and one dependency for the routes that page with a cursor."""

from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession

Item = TypeVar("Item")
Position = TypeVar("Position")


class Page(BaseModel, Generic[Item]):
    """`{"data": [...], "has_more": bool}`. A list answered whole always has `has_more` false.

    Name each list by subclassing (`class RunList(Page[RunOut])`): the OpenAPI document calls a bare
    `Page[RunOut]` `Page_RunOut_`.
    """

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)  # every answer has has_more

    data: list[Item]
    has_more: bool = Field(False, description="More items follow: ask again with `after` = the last item's id (or seq).")


@dataclass(frozen=True)
class Cursor(Generic[Position]):
    """Where a page starts (after this id or seq; None or 0: the first page) and how many items it holds."""

    after: Position
    limit: int


def cursor_params(after: Any, *, first: Any = None, default_limit: int, max_limit: int, limit_help: str | None = None) -> Any:
    """The dependency of a cursor route: `after` is its annotated query type (documented there), `first` its default."""

    async def cursor(
        after: after = first,  # type: ignore[valid-type]
        limit: Annotated[int, Query(ge=1, le=max_limit, description=limit_help)] = default_limit,
    ) -> Cursor:
        return Cursor(after, limit)

    return Annotated[Cursor, Depends(cursor)]


async def fetch_page(session: AsyncSession, query: Select, limit: int) -> tuple[list, bool]:
    """A page of the query's rows, in the order it asks for, and whether more follow (one row more is read to know)."""
    rows = (await session.scalars(query.limit(limit + 1))).all()
    return list(rows[:limit]), len(rows) > limit


async def newest_first(session: AsyncSession, model: Any, *, tenant: str, graph_id: str | None, after: str | None,
                       limit: int) -> tuple[list, bool]:
    """A page of a tenant's rows of `model` (of one graph, if given), newest first: its ids sort by creation time, and
    `after` is the last id of the page before."""
    query = select(model).where(model.tenant == tenant)
    if graph_id is not None:
        query = query.where(model.graph_id == graph_id)
    if after is not None:
        query = query.where(model.id < after)
    return await fetch_page(session, query.order_by(model.id.desc()), limit)
