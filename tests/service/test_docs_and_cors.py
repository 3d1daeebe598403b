"""Offline docs, stable operation ids, CORS and 405s, in process against `create_app`."""

import json
import re

import httpx
import pytest
from openapi_spec_validator import validate

from app.kit.settings import Settings
from app.main import create_app
from tests.support import connect, lifespan

ORIGIN = "http://localhost:3000"
KEY = "docs-test-key"
OPERATION_IDS = {
    "addSuppressions", "getSuppression", "deleteSuppression", "listRunReplies", "listBatchReplies", "relabelReply",
    "listDraftBatches", "cancelDraftBatch", "resumeDraftBatch", "cancelEvaluation",
    "createLearnLoop", "listRuns", "getRun", "cancelRun", "resumeRun", "listIterations", "getIteration",
    "getNodeScores", "listEvents", "listWebhookDeliveries", "listGraphs", "createGraph", "listNodes", "getNode",
    "listScenarios", "getHealth", "getReadiness", "listJudges",
    "replaceGraph", "deleteGraph", "getGraph", "deleteRun", "exportRun",
    "reportOutcomes", "createOutcomeSource", "listOutcomeSources", "getOutcomeSource", "deleteOutcomeSource",
    "receiveProviderEvents", "receiveReply", "receiveReplyMime", "getRunOutcomes",
    "getPolicy", "listPolicies", "keepPolicy", "listKeptPolicies", "deletePolicy", "getDeployment", "putDeployment", "createDrafts", "getDraftBatch", "listDrafts", "getBatchOutcomes", "createEvaluation", "getEvaluation", "listEvaluations",
    "listGraphEvents", "listBatchEvents",
}
ASSET_URL = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)=[\"']([^\"']+)[\"']", re.IGNORECASE)
CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}


@pytest.fixture(scope="module")
def database_url(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('docs')}/db.sqlite"


def settings(database_url: str, **overrides) -> Settings:
    return Settings(_env_file=None, database_url=database_url, environment="test", run_worker=False, **overrides)


@pytest.fixture(scope="module")
async def started(database_url):
    """The one started app of the module (DBOS is process-global), with keys and CORS: the requests that need the database."""
    app = create_app(settings(database_url, api_keys=[KEY], cors_origins=[ORIGIN]))
    async with lifespan(app):
        yield app


@pytest.fixture
def client(database_url):
    """Apps in other configurations, not started: for requests that need no database."""
    def make(*, api_keys: list[str] = (), cors_origins: list[str] = ()) -> httpx.AsyncClient:
        return connect(create_app(settings(database_url, api_keys=list(api_keys), cors_origins=list(cors_origins))))

    return make


def preflight(method: str, headers: str = "authorization", origin: str = ORIGIN) -> dict:
    return {"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
@pytest.mark.parametrize("api_keys", [[], [KEY]], ids=["open", "with-keys"])
async def test_docs_pages_load_only_local_assets(client, page, api_keys):
    async with client(api_keys=api_keys) as http:
        response = await http.get(page)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
        assets = ASSET_URL.findall(response.text)
        assert any(url.endswith(".js") for url in assets), response.text
        assert not re.search(r"(https?:)?//", " ".join(assets)), assets
        assert "googleapis" not in response.text and "cdn." not in response.text
        for url in assets:
            asset = await http.get(url)
            assert asset.status_code == 200, url
            assert CONTENT_TYPES[url[url.rindex("."):]] in asset.headers["content-type"], (url, asset.headers)
            assert len(asset.content) > 1000, url
        assert (await http.get("/openapi.json")).status_code == 200
        if api_keys:
            assert (await http.get("/runs")).status_code == 401


async def test_redoc_opens_on_the_api_and_loads_no_image_from_elsewhere(client):
    """ReDoc lists the tags in the document's order, else the webhooks' first; its bundle would show Redocly's logo
    from their CDN."""
    async with client() as http:
        page = (await http.get("/redoc")).text
        spec = (await http.get("/openapi.json")).json()
        [bundle_url] = [url for url in ASSET_URL.findall(page) if url.endswith(".js")]
        bundle = (await http.get(bundle_url)).text
    assert len(bundle) > 1_000_000 and "cdn.redoc.ly" not in bundle
    assert not re.search(r"""src:["'](https?:)?//""", bundle)  # no element of ReDoc's own points elsewhere
    names = [tag["name"] for tag in spec["tags"]]
    used = {tag for section in ("paths", "webhooks") for item in spec[section].values() for op in item.values()
            for tag in op["tags"]}
    assert set(names) == used and len(names) == len(used)
    assert names[0] == "runs" and names[-1] == "webhook events"
    assert all(op["tags"] == ["webhook events"] for item in spec["webhooks"].values() for op in item.values())


async def test_static_prefix_does_not_open_other_paths(started):
    """The auth bypass for /docs/static/ reaches only the asset folder, whatever dot segments a raw client sends."""
    app = started
    for path in ("/docs/static/../../runs", "/docs/static/%2e%2e/%2e%2e/runs", "/docs/static/../../../etc/passwd"):
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                 "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": [],
                 "server": ("test", 80), "client": ("127.0.0.1", 1234)}
        await app(scope, receive, send)
        assert sent[0]["status"] == 404, (path, sent)


async def test_openapi_is_valid_with_stable_unique_operation_ids(client):
    async with client() as http:
        spec = (await http.get("/openapi.json")).json()
    validate(spec)
    operations = [op for item in spec["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids)), ids
    assert set(ids) == OPERATION_IDS
    for op in operations:
        assert op.get("summary") and op.get("description"), op["operationId"]
    assert not any(path.startswith(("/docs", "/redoc")) for path in spec["paths"])
    for path, method, code in (("/learn-loop", "post", "429"), ("/runs/{run_id}/export", "get", "503")):  # refusals a client must handle
        assert "Retry-After" in spec["paths"][path][method]["responses"][code]["headers"], (path, code)


def test_every_list_is_a_named_page_with_has_more():
    """Every list shares one envelope, and each keeps a plain schema name (not `Page_RunOut_`)."""
    schemas = create_app(Settings(environment="test")).openapi()["components"]["schemas"]
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name) for name in schemas), sorted(schemas)
    lists = {name for name, schema in schemas.items() if set(schema.get("properties", {})) == {"data", "has_more"}}
    assert lists == {"RunList", "IterationList", "JudgeList", "EventList", "DeliveryList", "GraphList", "NodePage", "ScenarioList",
                     "OutcomeSourceList", "PolicyList", "DraftPage", "EvaluationList", "GraphEventList", "BatchEventList",
                     "ReplyList", "BatchPage"}
    assert all(schemas[name]["required"] == ["data", "has_more"] for name in lists)


async def test_cors_allows_configured_origins_only(client):
    async with client(cors_origins=[ORIGIN, "https://app.example.com"]) as http:
        response = await http.options("/learn-loop", headers=preflight("POST", "authorization, content-type, idempotency-key"))
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == ORIGIN
        assert {"GET", "POST"} <= {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
        allowed = response.headers["access-control-allow-headers"].lower()
        for header in ("authorization", "content-type", "idempotency-key", "last-event-id"):
            assert header in allowed

        refused = await http.options("/runs", headers=preflight("GET", origin="http://evil.example"))
        assert "access-control-allow-origin" not in refused.headers

        simple = await http.get("/healthz", headers={"Origin": ORIGIN})
        assert simple.status_code == 200 and simple.headers["access-control-allow-origin"] == ORIGIN
        other = await http.get("/healthz", headers={"Origin": "http://evil.example"})
        assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


async def test_without_cors_origins_no_cors_headers(client):
    async with client() as http:
        response = await http.get("/healthz", headers={"Origin": ORIGIN})
        assert not [h for h in response.headers if h.startswith("access-control-")]
        response = await http.options("/runs", headers=preflight("GET"))
        assert response.status_code == 405
        assert not [h for h in response.headers if h.startswith("access-control-")]


async def test_cors_with_api_keys(started):
    async with connect(started) as http:
        response = await http.options("/runs", headers=preflight("GET"))  # a preflight carries no key
        assert response.status_code == 200 and response.headers["access-control-allow-origin"] == ORIGIN

        anonymous = await http.get("/runs", headers={"Origin": ORIGIN})
        assert anonymous.status_code == 401 and "Bearer" in anonymous.json()["detail"]
        assert anonymous.headers["access-control-allow-origin"] == ORIGIN  # the page can read why

        keyed = await http.get("/runs", headers={"Origin": ORIGIN, "Authorization": f"Bearer {KEY}"})
        assert keyed.status_code == 200 and keyed.headers["access-control-allow-origin"] == ORIGIN


async def test_405_lists_the_allowed_methods(client):
    async with client() as http:
        response = await http.options("/runs")
        assert response.status_code == 405
        assert "GET" in {m.strip() for m in response.headers["allow"].split(",")}
        response = await http.delete("/graphs")
        assert response.status_code == 405 and {m.strip() for m in response.headers["allow"].split(",")} == {"GET", "POST"}
        response = await http.get("/runs/some-run/cancel")
        assert response.status_code == 405 and response.headers["allow"] == "POST"




def test_every_reference_in_the_openapi_document_resolves():
    """A `$ref` to a schema the document lacks renders as nothing in Swagger UI and stops ReDoc."""
    spec = create_app(Settings(environment="test")).openapi()
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(spec)))
    assert refs and refs <= set(spec["components"]["schemas"]), sorted(refs - set(spec["components"]["schemas"]))
