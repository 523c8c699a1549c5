"""Every request body is read once and strictly, before any route sees it: UTF-8 only, no
duplicate keys, no ``Infinity``/``NaN``, no NUL, limits on depth, numbers and size (413 while
reading, also for a chunked body) — each a clean 4xx naming what to fix, and nothing stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute

from tests.api.conftest import Api, small_job
from topoq.api.app import create_app
from topoq.api.request_body import StrictJsonRoute
from topoq.domain.limits import MAX_DEPTH, MAX_REQUEST_BYTES

V1 = "/api/v1"
JSON = {"Content-Type": "application/json"}


def post_raw(api: Api, body: bytes, path: str = "/jobs", method: str = "POST") -> Any:
    return api.client.request(
        method, f"{V1}{path}", content=body, headers={**api.headers("admin"), **JSON}
    )


def small_job_text(name: str = "j") -> str:
    return json.dumps(small_job(name))


def stored_jobs(api: Api) -> int:
    return api.store.count_jobs()


def assert_refused(response: Any, status: int = 422) -> dict[str, str]:
    assert response.status_code == status, response.text
    detail: dict[str, str] = response.json()["detail"]
    assert detail["message"], detail
    return detail


def test_a_valid_body_is_still_accepted(api: Api) -> None:
    assert post_raw(api, small_job_text("fine").encode()).status_code == 201


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32", "latin-1"])
def test_a_body_not_in_utf8_is_refused_naming_the_encoding(api: Api, encoding: str) -> None:
    text = small_job_text().replace('"j"', '"caf\u00e9"')
    detail = assert_refused(post_raw(api, text.encode(encoding)))
    assert "UTF-8" in detail["message"] + detail["hint"] and detail["where"] == "body"
    assert stored_jobs(api) == 0


def test_a_byte_order_mark_is_refused(api: Api) -> None:
    assert_refused(post_raw(api, b"\xef\xbb\xbf" + small_job_text().encode()))


@pytest.mark.parametrize("constant", ["Infinity", "-Infinity", "NaN"])
def test_infinity_and_nan_are_refused(api: Api, constant: str) -> None:
    text = small_job_text().replace('"nvidia.com/gpu": 8', f'"nvidia.com/gpu": {constant}')
    detail = assert_refused(post_raw(api, text.encode()))
    assert constant in detail["message"]
    assert stored_jobs(api) == 0


def test_a_float_too_large_to_be_finite_is_refused(api: Api) -> None:
    text = small_job_text().replace('"nvidia.com/gpu": 8', '"nvidia.com/gpu": 1e400')
    assert "finite" in assert_refused(post_raw(api, text.encode()))["message"]


@pytest.mark.parametrize("digits", [31, 5_000, 100_000])
def test_an_integer_of_too_many_digits_is_refused(api: Api, digits: int) -> None:
    text = small_job_text().replace('"nvidia.com/gpu": 8', f'"nvidia.com/gpu": {"9" * digits}')
    detail = assert_refused(post_raw(api, text.encode()))
    assert "digits" in detail["message"]
    assert stored_jobs(api) == 0


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"format": "topoq", "format": "kueue", "document": {}}', "format"),
        (small_job_text().replace('"kind": "Job"', '"kind": "Job", "kind": "Workload"'), "kind"),
        (small_job_text().replace('"count": 2', '"count": 2, "count": 200'), "count"),
    ],
)
def test_a_duplicate_key_is_refused_naming_it(api: Api, text: str, key: str) -> None:
    detail = assert_refused(post_raw(api, text.encode()))
    assert repr(key) in detail["message"] and "twice" in detail["message"]
    assert stored_jobs(api) == 0


def test_every_route_with_a_body_reads_it_strictly(api: Api) -> None:
    """The class of problem: a router made without the strict route class would take the
    duplicate key (and the last would win)."""
    paths = create_app(api.service).openapi()["paths"]
    with_body = [
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    assert len(with_body) >= 3  # POST /jobs, PUT /policy, POST /tokens
    for method, path in with_body:
        concrete = path.removeprefix(V1).replace("{", "").replace("}", "")
        response = post_raw(api, b'{"a": 1, "a": 2}', concrete, method)
        detail = assert_refused(response)
        assert "'a'" in detail["message"], (method, path, detail)


def test_every_route_of_the_app_is_a_strict_route(api: Api) -> None:
    """Also the routes without a body: their path and query parameters are checked for NUL."""
    app = create_app(api.service)
    routers = [route.original_router for route in app.routes if hasattr(route, "original_router")]
    routes = [route for router in routers for route in router.routes if isinstance(route, APIRoute)]
    assert len(routes) >= 25
    assert [r.path for r in routes if not isinstance(r, StrictJsonRoute)] == []


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 1_000_000])
def test_a_body_nested_too_deep_is_refused(api: Api, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    text = small_job_text().replace('"spec": {', f'"extra": {deep}, "spec": {{')
    detail = assert_refused(post_raw(api, text.encode()))
    assert "deep" in detail["message"] or "nested" in detail["message"]
    assert stored_jobs(api) == 0


@pytest.mark.parametrize(
    "text",
    [
        small_job_text().replace('"workers"', '"work\\u0000ers"'),
        small_job_text().replace('"kind"', '"ki\\u0000nd"'),
        small_job_text().replace('"format": "topoq"', '"format": "topoq", "team": "nlp\\u0000"'),
    ],
)
def test_a_nul_anywhere_in_a_body_is_refused(api: Api, text: str) -> None:
    detail = assert_refused(post_raw(api, text.encode()))
    assert "NUL" in detail["message"]
    assert stored_jobs(api) == 0


def test_a_nul_in_a_query_or_path_parameter_is_refused(api: Api) -> None:
    admin = api.headers("admin")
    for url in (f"{V1}/jobs?team=nlp%00x", f"{V1}/jobs?user=%00", f"{V1}/reports/usage?team=a%00"):
        detail = assert_refused(api.client.get(url, headers=admin))
        assert detail["where"].startswith("query."), detail
    detail = assert_refused(api.client.get(f"{V1}/jobs/a%00b", headers=admin))
    assert detail["where"] == "path.job_id"
    detail = assert_refused(api.client.post(f"{V1}/nodes/p5-%001/cordon", headers=admin))
    assert detail["where"] == "path.name"


def test_a_body_over_the_limit_is_a_413(api: Api) -> None:
    padding = "x" * (MAX_REQUEST_BYTES // 2)
    body = json.dumps({**small_job("big"), "a": padding, "b": padding}).encode()
    detail = assert_refused(post_raw(api, body), status=413)
    assert "MiB" in detail["message"] + detail["hint"]
    assert stored_jobs(api) == 0


def test_a_chunked_body_over_the_limit_is_a_413(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"format": "topoq", "document": {"x": "'
        for _ in range(MAX_REQUEST_BYTES // 65536 + 2):
            yield b"x" * 65536
        yield b'"}}'

    response = api.client.post(
        f"{V1}/jobs", content=chunks(), headers={**api.headers("admin"), **JSON}
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_refused(response, status=413)


def test_the_limit_stops_reading_before_the_whole_body_is_in_memory(api: Api) -> None:
    """Straight over ASGI: the app is offered 1 MiB chunks without end; it must answer 413
    after reading a little more than the limit, never ask for all of them."""
    app = create_app(api.service)
    chunk = b"x" * (1024 * 1024)
    served = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal served
        served += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    token = api.headers("admin")["Authorization"].encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": f"{V1}/jobs", "raw_path": f"{V1}/jobs".encode(),
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "headers": [(b"content-type", b"application/json"), (b"authorization", token)],
    }  # fmt: skip
    asyncio.run(app(scope, receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413
    assert served <= MAX_REQUEST_BYTES // len(chunk) + 2


@pytest.mark.parametrize(
    "media",
    ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"],
)
def test_every_body_sent_as_anything_but_json_is_refused_for_that(api: Api, media: str) -> None:
    """``curl -d`` alone sends a form: the answer names the content type and the header to
    send, on every route that takes a body, and nothing is stored."""
    paths = create_app(api.service).openapi()["paths"]
    with_body = [
        (method.upper(), path.removeprefix(V1).replace("{", "").replace("}", ""))
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    for method, path in with_body:
        response = api.client.request(
            method,
            f"{V1}{path}",
            content=small_job_text("formed").encode(),
            headers={**api.headers("admin"), "Content-Type": media},
        )
        detail = assert_refused(response)
        assert detail["where"] == "headers.content-type", (method, path, detail)
        assert media.split(";", maxsplit=1)[0] in detail["message"]
        assert "Content-Type: application/json" in detail["hint"]
    assert stored_jobs(api) == 0


@pytest.mark.parametrize("headers", [JSON, {"Content-Type": "application/json; charset=utf-8"}, {}])
def test_json_with_a_charset_or_without_a_content_type_is_read(
    api: Api, headers: dict[str, str]
) -> None:
    response = api.client.post(
        f"{V1}/jobs",
        content=small_job_text("plain").encode(),
        headers={**api.headers("admin"), **headers},
    )
    assert response.status_code == 201, response.text
