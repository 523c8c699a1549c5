"""The intake's refusals through a real ``topoq server`` process, as a user meets them: a job
id with ``/``, an environment variable named ``A=B``, a duplicate key, a UTF-16 body and a
chunked body past the size limit are 4xx answers naming what to fix, nothing is stored, and
the server keeps admitting valid work."""

from __future__ import annotations

import json
import select
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.conftest import small_job
from tests.api.test_server import admin, member, server, wait_for  # noqa: F401 fixtures of the real server
from topoq.domain.limits import MAX_REQUEST_BYTES

JSON = {"Content-Type": "application/json"}


def stored(client: httpx.Client) -> int:
    return int(client.get("/jobs", params={"limit": 1}).json()["total"])


def with_environment(name: str, environment: dict[str, str]) -> dict[str, object]:
    body = small_job(name)
    body["document"]["spec"]["podSets"][0]["environment"] = environment  # type: ignore[index]
    return body


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({**small_job("fine"), "id": "../../etc/passwd"}, "id"),
        (small_job("slash/inside"), "document.metadata.name"),
        (with_environment("env-eq", {"A=B": "1"}), "document.spec.podSets[0].environment"),
    ],
)
def test_a_bad_id_or_environment_name_is_a_422_and_nothing_is_stored(
    member: httpx.Client,  # noqa: F811 the fixture
    body: dict[str, object],
    where: str,
) -> None:
    before = stored(member)
    response = member.post("/jobs", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["where"] == where and detail["hint"], detail
    assert stored(member) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"format": "topoq", "format": "kueue", "document": {}}', "'format' appears twice"),
        (json.dumps(small_job("utf16")).encode("utf-16"), "not UTF-8"),
    ],
)
def test_a_body_that_is_not_strict_json_is_a_422(
    member: httpx.Client,  # noqa: F811 the fixture
    content: bytes,
    message: str,
) -> None:
    before = stored(member)
    response = member.post("/jobs", content=content, headers=JSON)
    assert response.status_code == 422 and message in response.json()["detail"]["message"]
    assert stored(member) == before


def test_a_chunked_body_past_the_limit_is_a_413_before_it_is_all_sent(
    server: tuple[str, Path],  # noqa: F811 the fixture
    member: httpx.Client,  # noqa: F811 the fixture
) -> None:
    """Over a raw socket, chunk by chunk without a Content-Length: the server answers 413
    once the limit is passed, while the client could still send much more (that the server
    stops reading at the limit is proved over ASGI in test_request_bodies.py)."""
    address = urlsplit(server[0])
    token = member.headers["Authorization"]
    chunk = b"x" * 65536
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(
            b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Authorization: {token}\r\n".encode()
            + b"Transfer-Encoding: chunked\r\n\r\n"
        )
        sent, answer = 0, b""
        while sent < 4 * MAX_REQUEST_BYTES and not answer:
            try:
                connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:  # the server closed the connection after answering
                break
            sent += len(chunk)
            if select.select([connection], [], [], 0)[0]:
                answer = connection.recv(65536)
        while b"MiB" not in answer and (more := connection.recv(65536)):
            answer += more
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"4 MiB" in answer
    assert sent < 4 * MAX_REQUEST_BYTES  # the limit, and what the sockets' buffers hold


def test_valid_work_is_still_admitted_after_the_refusals(
    member: httpx.Client,  # noqa: F811 the fixture
) -> None:
    assert member.post("/jobs", json=small_job("after-refusals")).status_code == 201
    job = wait_for(
        lambda: member.get("/jobs/after-refusals").json(),
        lambda j: j["phase"] in ("running", "succeeded"),
    )
    assert job["phase"] in ("running", "succeeded")
