"""On PostgreSQL, which refuses what SQLite takes (a NUL in text, a name longer than its
column), the intake answers every such request with a 422 before the store sees it: before,
they were 500s."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import CLUSTER_FILE, POLICY_FILE, small_job
from topoq.api.app import create_app
from topoq.api.service import Service
from topoq.discovery.policy import load_policy
from topoq.discovery.sources import load_cluster
from topoq.store.sql_store import SqlStore, open_store
from topoq.testing.postgres import given_server, server_binaries, start_throwaway
from topoq.wire.v1 import Role

V1 = "/api/v1"


@dataclass
class PostgresApi:
    client: TestClient
    store: SqlStore
    admin: dict[str, str]


@pytest.fixture(scope="module")
def postgres_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresApi]:
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
    store = open_store(url, Path(tmp_path_factory.mktemp("postgres-api")))
    try:
        cluster = load_cluster(CLUSTER_FILE)
        store.save_nodes(cluster.nodes, actor="test", now=0)
        store.save_policy(load_policy(POLICY_FILE), actor="test", now=0)
        token = store.create_token("admin", Role.ADMIN.value)[0]
        app = create_app(Service(store, cluster.topology))
        with TestClient(app, raise_server_exceptions=False) as client:
            yield PostgresApi(client, store, {"Authorization": f"Bearer {token}"})
    finally:
        store.close()
        server.drop_database(url)
        server.stop()


def submit(api: PostgresApi, body: dict[str, Any]) -> Any:
    return api.client.post(f"{V1}/jobs", json=body, headers=api.admin)


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
    postgres_api: PostgresApi, body: dict[str, Any], where: str
) -> None:
    response = submit(postgres_api, body)
    assert response.status_code == 422, response.text
    assert response.json()["detail"]["where"] == where
    assert postgres_api.store.count_jobs() == 0


@pytest.mark.parametrize(
    "url", [f"{V1}/jobs?team=a%00", f"{V1}/jobs/a%00b", f"{V1}/jobs/a%00b/cancel"]
)
def test_a_nul_in_a_parameter_is_a_422_not_a_500(postgres_api: PostgresApi, url: str) -> None:
    method = "POST" if url.endswith("cancel") else "GET"
    response = postgres_api.client.request(method, url, headers=postgres_api.admin)
    assert response.status_code == 422, response.text


def test_a_long_filter_finds_nothing_and_a_valid_job_is_stored(postgres_api: PostgresApi) -> None:
    listed = postgres_api.client.get(
        f"{V1}/jobs", params={"team": "t" * 300}, headers=postgres_api.admin
    )
    assert listed.status_code == 200 and listed.json()["total"] == 0
    assert submit(postgres_api, small_job("fine-on-postgres")).status_code == 201
