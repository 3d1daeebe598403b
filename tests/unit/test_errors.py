"""One handler answers every ServiceError with the status and headers its class carries, in the contract's shape."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.http.errors import install_handlers
from app.kit.errors import BadRequest, Conflict, NotFound, ServiceError, TooManyRequests
from app.runs.transitions import Conflict as RunConflict
from app.runs.transitions import RunGone


@pytest.mark.parametrize(("error", "status", "headers"), [
    (BadRequest("not JSON text"), 400, {}),
    (NotFound("run 'x' not found"), 404, {}),
    (Conflict("graph 'g' is in use"), 409, {}),
    (TooManyRequests("20 runs are queued or running", retry_after_s=30), 429, {"retry-after": "30"}),
    (RunConflict("run x already succeeded"), 409, {}),
    (RunGone("run 'x' not found"), 404, {}),
])
def test_a_refusal_is_its_status_and_detail(error: ServiceError, status: int, headers: dict):
    app = FastAPI()
    install_handlers(app)

    @app.get("/refuse")
    async def refuse():
        raise error

    response = TestClient(app).get("/refuse")
    assert response.status_code == status
    assert response.json() == {"detail": error.detail}
    assert {name: response.headers[name] for name in headers} == headers
