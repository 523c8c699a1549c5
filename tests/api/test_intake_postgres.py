"""On PostgreSQL, which refuses what SQLite takes (a NUL in text, a name longer than its
column), the intake answers every such request with a 422 before the store sees it: before,
they were 500s."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import Api, make_api, small_job
from topoq.testing.postgres import given_server, server_binaries, start_throwaway

V1 = "/api/v1"


@pytest.fixture(scope="module")
def postgres_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    server = given_server()
    if server is None:
        binaries = server_binaries()
        if binaries is None:
            reason = "no PostgreSQL: install the postgresql package"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        server = start_throwaway(binaries)
    url = server.create_database()
    try:
        yield from make_api(Path(tmp_path_factory.mktemp("postgres-api")), url)
    finally:
        server.drop_database(url)
        server.stop()


def submit(api: Api, body: dict[str, Any]) -> Any:
    return api.client.post(f"{V1}/jobs", json=body, headers=api.headers("admin"))


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**small_job("nul"), "priorityClass": "inference\x00"}, "body.priorityClass"),
        (small_job("nul\x00name"), "body.document.metadata.name"),
        ({**small_job("long"), "id": "a" * 300}, "id"),
        ({**small_job("long"), "priorityClass": "p" * 300}, "priorityClass"),
        ({**small_job("long"), "team": "t" * 300}, "team"),
    ],
)
def test_a_nul_or_an_over_long_name_is_a_422_not_a_500(
    postgres_api: Api, body: dict[str, Any], where: str
) -> None:
    response = submit(postgres_api, body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["where"] == where
    assert postgres_api.store.count_jobs() == 0


@pytest.mark.parametrize(
    "url", [f"{V1}/jobs?team=a%00", f"{V1}/jobs/a%00b", f"{V1}/jobs/a%00b/cancel"]
)
def test_a_nul_in_a_parameter_is_a_422_not_a_500(postgres_api: Api, url: str) -> None:
    method = "POST" if url.endswith("cancel") else "GET"
    response = postgres_api.client.request(method, url, headers=postgres_api.headers("admin"))
    assert response.status_code == 422, response.text


def test_a_long_filter_finds_nothing_and_a_valid_job_is_stored(postgres_api: Api) -> None:
    listed = postgres_api.client.get(
        f"{V1}/jobs", params={"team": "t" * 300}, headers=postgres_api.headers("admin")
    )
    assert listed.status_code == 200 and listed.json()["total"] == 0
    assert submit(postgres_api, small_job("fine-on-postgres")).status_code == 201
