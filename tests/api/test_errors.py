"""One error shape everywhere, no traceback to a client, and the OpenAPI golden file."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Api
from topoq.api.app import create_app
from topoq.api.openapi import openapi_text

GOLDEN = Path(__file__).parent / "openapi.json"
REGENERATE = "python -m topoq.api.openapi > tests/api/openapi.json"


def test_no_token_and_a_bad_token_are_401(api: Api) -> None:
    missing = api.client.get("/api/v1/jobs")
    assert missing.status_code == 401 and "no API token" in missing.json()["detail"]["message"]
    wrong = api.client.get("/api/v1/jobs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == "Bearer"


def test_an_unknown_route_and_method_keep_the_error_shape(api: Api) -> None:
    unknown = api.client.get("/api/v1/nothing", headers=api.headers("admin"))
    assert unknown.status_code == 404 and "/api/v1/nothing" in unknown.json()["detail"]["message"]
    wrong = api.client.delete("/api/v1/jobs", headers=api.headers("admin"))
    assert wrong.status_code == 405 and "DELETE" in wrong.json()["detail"]["message"]


def test_a_body_that_is_not_json_is_a_422(api: Api) -> None:
    response = api.client.post(
        "/api/v1/jobs",
        content=b"{not json",
        headers={**api.headers("admin"), "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and response.json()["detail"]["where"].startswith("body")


def test_an_unexpected_error_is_a_500_without_a_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[object]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api.store, "nodes", broken)
    response = api.client.get("/api/v1/nodes", headers=api.headers("admin"))
    assert response.status_code == 500
    assert "secret" not in response.text and "Traceback" not in response.text
    message = response.json()["detail"]["message"]
    reference = message.split("reference ")[1].rstrip(")")
    assert reference in caplog.text and "secret internals" in caplog.text


def test_the_openapi_schema_matches_the_golden_file() -> None:
    current = openapi_text()
    golden = GOLDEN.read_text(encoding="utf-8") if GOLDEN.exists() else ""
    if current != golden:
        changed = sorted(
            set(json.loads(current)["paths"]) ^ set(json.loads(golden or "{}").get("paths", {}))
        )
        pytest.fail(
            "the OpenAPI schema changed (a breaking change needs a new wire version); if it "
            f"is deliberate, regenerate the golden file: {REGENERATE}"
            + (f"; paths added or removed: {changed}" if changed else "")
        )


@pytest.mark.parametrize(
    "raised",
    [
        ValueError("Exceeds the limit (4300 digits) for integer string conversion"),
        decimal.InvalidOperation("quantity"),
        OverflowError("int too large to convert to float"),
        RecursionError("maximum recursion depth exceeded"),
    ],
)
def test_an_error_a_reader_did_not_foresee_is_a_422_not_a_500(
    api: Api, raised: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(api.service)

    def read_unforeseen() -> None:
        raise raised

    app.add_api_route("/api/v1/unforeseen", read_unforeseen)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/api/v1/unforeseen")
    assert response.status_code == 422, response.text
    assert type(raised).__name__ in response.json()["detail"]["message"]
    assert str(raised) in caplog.text  # logged for whoever fixes the reader
