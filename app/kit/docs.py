"""Swagger UI at /docs and ReDoc at /redoc, with their assets served by the service itself.

FastAPI's defaults load the JavaScript and CSS from a CDN, so the pages are blank without a
network. The `fastapi-offline` package ships Swagger UI 5 and ReDoc 2 builds; we serve its asset
folder under `STATIC_PATH` and point FastAPI's page builders at it.
"""

import re
from functools import lru_cache
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

STATIC_PATH = "/docs/static"
# ReDoc's sidebar shows Redocly's logo from their CDN, with no option to turn it off: /redoc gets a copy of the bundle
# whose logo address is an empty data: URL (the image fails to decode and ReDoc leaves it out), and the page's policy
# lets the browser load only what this service serves, so the page makes no outside request.
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_JS = f"{STATIC_PATH}/redoc.offline.js"
SAME_ORIGIN_ONLY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                    "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:")
ASSETS = files("fastapi_offline") / "static"  # swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png


def operation_id(route: APIRoute) -> str:
    """The endpoint function's name in camelCase (`create_learn_loop` → `createLearnLoop`): stable, and automatic for new routes."""
    first, *rest = re.sub(r"\W", "_", route.name).split("_")
    return first + "".join(word[:1].upper() + word[1:] for word in rest)


@lru_cache(maxsize=1)
def redoc_bundle() -> bytes:
    """ReDoc's bundle without the one address outside this service that it loads (Redocly's logo)."""
    return (ASSETS / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, b"data:,")


def tag_order(spec: dict) -> list[dict]:
    """The document's tags, the paths' first (in the order they appear) and then those only the webhooks use.

    ReDoc reads the webhooks before the paths: without a `tags` list it would open on the webhook events.
    """
    names: list[str] = []
    for section in ("paths", "webhooks"):
        for item in spec.get(section, {}).values():
            for operation in item.values():
                for tag in operation.get("tags", []) if isinstance(operation, dict) else []:
                    if tag not in names:
                        names.append(tag)
    return [{"name": name} for name in names]


def install(app: FastAPI) -> None:
    """Adds /docs, /docs/oauth2-redirect, /redoc and the asset mount; create the app with `docs_url=None, redoc_url=None`."""
    build_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            spec = build_openapi()
            spec.setdefault("tags", tag_order(spec))
        return app.openapi_schema

    app.openapi = openapi

    @app.get(REDOC_JS, include_in_schema=False)  # before the mount below, which would answer 404 for it
    async def redoc_js() -> Response:
        return Response(redoc_bundle(), media_type="text/javascript")

    app.mount(STATIC_PATH, StaticFiles(directory=str(ASSETS)), name="docs-static")
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    def root_path(request: Request) -> str:
        return request.scope.get("root_path", "").rstrip("/")

    def urls(request: Request) -> tuple[str, str]:
        return f"{root_path(request)}{app.openapi_url}", f"{root_path(request)}{STATIC_PATH}"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        openapi_url, static = urls(request)
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title} - Swagger UI", oauth2_redirect_url=oauth2_redirect_url,
            swagger_js_url=f"{static}/swagger-ui-bundle.js", swagger_css_url=f"{static}/swagger-ui.css",
            swagger_favicon_url=f"{static}/favicon.png", swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(oauth2_redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        openapi_url, static = urls(request)
        page = get_redoc_html(
            openapi_url=openapi_url, title=f"{app.title} - ReDoc", redoc_js_url=f"{root_path(request)}{REDOC_JS}",
            redoc_favicon_url=f"{static}/favicon.png", with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = SAME_ORIGIN_ONLY
        return page


def inline_refs(schema, defs: dict | None = None):
    """A JSON schema with its `$defs` written in place, so it can stand alone in the OpenAPI document."""
    if defs is None:
        schema = dict(schema)
        defs = schema.pop("$defs", {})
    if isinstance(schema, dict):
        if "$ref" in schema:
            return inline_refs(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
        return {key: inline_refs(value, defs) for key, value in schema.items()}
    if isinstance(schema, list):
        return [inline_refs(value, defs) for value in schema]
    return schema
