"""The dashboard: one HTML page and its script and style sheet, public; the API calls it makes carry the key."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from app.kit.errors import NotFound

STATIC = Path(__file__).parent / "static"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}  # nothing else under /ui is served
# Everything comes from this origin: no CDN, no inline script or style.
HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("ui", status_code=307)  # relative: works behind a path prefix too


@router.get("/ui")
async def dashboard() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=HEADERS)


@router.get("/ui/{asset}")
async def dashboard_asset(asset: str) -> FileResponse:
    if asset not in ASSETS:
        raise NotFound(f"dashboard file {asset!r} not found")
    return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers=HEADERS)
