"""The API's records in the server log, in-process: an ``api_error`` event per error answer
(4xx at INFO, 5xx at ERROR with the traceback) and, when asked for, a ``request`` event per
request naming the token's principal, never the token."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Api
from topoq.api.access_log import ACCESS_LOGGER
from topoq.api.app import create_app
from topoq.engine.event_log import EVENT_ATTRIBUTE, FIELDS_ATTRIBUTE


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    return [
        {"level": record.levelname, "traceback": bool(record.exc_info)}
        | getattr(record, FIELDS_ATTRIBUTE)
        for record in caplog.records
        if getattr(record, EVENT_ATTRIBUTE, None) == name
    ]


def test_each_request_is_one_access_line_with_its_principal_never_its_token(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with TestClient(create_app(api.service, access_log=True)) as client:
        assert client.get("/api/v1/whoami", headers=api.headers("admin")).status_code == 200
        assert client.get("/api/v1/jobs?phase=running").status_code == 401
    whoami, jobs = events(caplog, "request")
    assert whoami["method"] == "GET" and whoami["path"] == "/api/v1/whoami"
    assert whoami["status"] == 200 and whoami["principal"] == "admin"
    assert whoami["duration_ms"] >= 0
    assert jobs["path"] == "/api/v1/jobs" and jobs["status"] == 401 and jobs["principal"] == "-"
    assert api.tokens["admin"] not in caplog.text and "phase=running" not in caplog.text


def test_without_the_access_log_no_request_is_logged(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    assert api.client.get("/api/v1/whoami", headers=api.headers("admin")).status_code == 200
    assert events(caplog, "request") == []


def test_a_4xx_is_an_info_event_and_a_5xx_an_error_with_its_traceback(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="topoq.api")
    assert api.client.get("/api/v1/jobs/nope", headers=api.headers("admin")).status_code == 404

    def broken() -> list[object]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(api.store, "nodes", broken)
    assert api.client.get("/api/v1/nodes", headers=api.headers("admin")).status_code == 500
    missing, failed = events(caplog, "api_error")
    assert missing["status"] == 404 and missing["code"] == "not_found"
    assert missing["path"] == "/api/v1/jobs/nope" and missing["level"] == "INFO"
    assert not missing["traceback"]
    assert failed["status"] == 500 and failed["code"] == "internal_error"
    assert failed["level"] == "ERROR" and failed["traceback"]
