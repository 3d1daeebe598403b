"""Liveness and readiness, public, for orchestrators and load balancers."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app import migrations
from app.deps import DatabaseDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness")
async def get_health() -> dict:
    """200 while the process lives; checks nothing else."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: database reachable and migrated", responses={503: {"description": "Not ready"}})
async def get_readiness(db: DatabaseDep) -> JSONResponse:
    """200 when the database is reachable and at the migration the code expects, else 503."""
    try:
        current = await migrations.current_revision(db.engine)
    except Exception as exc:  # any database failure means "not ready", never a 500
        return JSONResponse({"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"}, 503)
    if current != migrations.head_revision():
        return JSONResponse({"status": "unavailable", "detail": f"database at {current}, code expects {migrations.head_revision()}"}, 503)
    return JSONResponse({"status": "ready"})
