"""Liveness and readiness, public, for orchestrators and load balancers."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.core import ServicesDep
from app.kit import migrations

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness")
async def get_health() -> dict:
    """200 while the process lives; checks nothing else."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: database reachable and migrated, model server up",
            responses={503: {"description": "Not ready"}})
async def get_readiness(svc: ServicesDep) -> JSONResponse:
    """200 when the database is reachable and at the migration the code expects, and what this process
    runs on besides (the embedded model server, in a worker) is up; else 503 saying which is not."""
    try:
        async with svc.db.connection() as connection:
            current = await migrations.current_revision(connection)
    except Exception as exc:  # any database failure means "not ready", never a 500
        return JSONResponse({"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"}, 503)
    if current != migrations.head_revision():
        return JSONResponse({"status": "unavailable", "detail": f"database at {current}, code expects {migrations.head_revision()}"}, 503)
    if problems := [problem for check in svc.health if (problem := check())]:
        return JSONResponse({"status": "unavailable", "detail": "; ".join(problems)}, 503)
    return JSONResponse({"status": "ready"})
