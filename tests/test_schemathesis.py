"""Property-based API testing from our own OpenAPI schema: no 5xx, and every response matches it."""

import pytest
import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance
from hypothesis import HealthCheck, settings

from app.main import create_app
from app.settings import Settings
from tests.support import Server

KEY = "schema-key"
# The schema cannot say that a graph or scenario id must exist, or that a webhook host must
# resolve to a public address: such schema-valid requests are rightly refused with a 422.
SEMANTIC = [positive_data_acceptance]
# derandomize: the same bounded examples on every CI run, so a red build is reproducible.
OPENAPI = create_app(Settings(_env_file=None)).openapi()
schema = schemathesis.openapi.from_dict(OPENAPI)
anonymous_schema = schemathesis.openapi.from_dict(OPENAPI)


@schema.auth()
class BearerKey:
    """Tells Schemathesis the key is supplied, so it does not count the header as test data."""

    def get(self, case, context):
        return KEY

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("schemathesis")
    # API only: generated runs stay queued instead of eating the CPU.
    server = Server(workdir, {"DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "API_KEYS": KEY, "RUN_WORKER": "false"})
    yield server.start()
    server.stop()


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_with_a_key(case, server):
    case.call_and_validate(base_url=server.url, excluded_checks=SEMANTIC)


@pytest.mark.slow
@anonymous_schema.parametrize()
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_without_a_key(case, server):
    response = case.call_and_validate(base_url=server.url, headers={"Authorization": "Bearer wrong"}, excluded_checks=SEMANTIC)
    if case.path not in ("/healthz", "/readyz") and case.method.upper() == case.operation.method.upper():
        assert response.status_code == 401
