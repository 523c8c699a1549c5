"""An answer that is not topoq's — not JSON, or JSON of another shape — is a ``ClientError``
that says so (no ``status``: the CLI exits 3, as for a server it cannot reach)."""

from __future__ import annotations

import httpx
import pytest

from topoq.client import ClientError, TopoqClient
from topoq.domain.errors import InvalidInputError


def answering(status: int, content: bytes, kind: str) -> TopoqClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content, headers={"content-type": kind})

    return TopoqClient("http://topoq.test", "t", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("content", "kind", "expected"),
    [
        (b"<html>hello</html>", "text/html", "with text/html, not JSON"),
        (b'{"unexpected": 1}', "application/json", "not this API's answer"),
        (b"[1, 2]", "application/json", "not this API's answer"),
        (bytes(range(256)), "application/octet-stream", "not JSON"),
    ],
)
def test_an_answer_that_is_not_topoqs_says_so(content: bytes, kind: str, expected: str) -> None:
    with pytest.raises(ClientError) as raised:
        answering(200, content, kind).teams()
    assert expected in str(raised.value) and raised.value.status is None
    assert "is it a topoq server" in str(raised.value)


@pytest.mark.parametrize("content", [b"[]", b"<h1>oops</h1>", b'"text"'])
def test_an_error_answer_without_topoqs_detail_keeps_its_status(content: bytes) -> None:
    with pytest.raises(ClientError) as raised:
        answering(404, content, "application/json").job("x")
    assert raised.value.status == 404 and "404 Not Found" in str(raised.value)


def test_a_server_url_httpx_cannot_use_is_bad_input() -> None:
    with pytest.raises(InvalidInputError):
        TopoqClient("http://127.0.0.1:port", None)
