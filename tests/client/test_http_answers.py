"""An answer that is not topoq's — not JSON, or JSON of another shape — is a ``ClientError``
that says so (no ``status``: the CLI exits 3, as for a server it cannot reach)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from topoq.client import ClientError, TopoqClient
from topoq.domain.errors import InvalidInputError
from topoq.executors.local.processes import free_port


@pytest.fixture
def answering() -> Iterator[object]:
    """A real HTTP server on a free port that answers every request with what a test sets
    (``answering(status, content, content type)`` gives a client of it)."""
    chosen: dict[str, object] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, content, kind = chosen["answer"]  # type: ignore[misc]
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def client(status: int, content: bytes, kind: str) -> TopoqClient:
        chosen["answer"] = (status, content, kind)
        return TopoqClient(f"http://127.0.0.1:{server.server_address[1]}", "t")

    try:
        yield client
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(
    ("content", "kind", "expected"),
    [
        (b"<html>hello</html>", "text/html", "with text/html, not JSON"),
        (b'{"unexpected": 1}', "application/json", "not this API's answer"),
        (b"[1, 2]", "application/json", "not this API's answer"),
        (bytes(range(256)), "application/octet-stream", "not JSON"),
    ],
)
def test_an_answer_that_is_not_topoqs_says_so(
    answering: Any, content: bytes, kind: str, expected: str
) -> None:
    with pytest.raises(ClientError) as raised:
        answering(200, content, kind).teams()
    assert expected in str(raised.value) and raised.value.status is None
    assert "is it a topoq server" in str(raised.value)


def test_fields_a_newer_server_added_to_an_answer_are_ignored(answering: Any) -> None:
    """A CLI keeps working against a server that answers with more than it knows."""
    row = {"id": "a", "team": "nlp", "phase": "pending", "gpus": 8, "addedLater": {"x": 1}}
    page = {"items": [row], "total": 1, "limit": 100, "offset": 0, "cursor": "later"}
    found = answering(200, json.dumps(page).encode(), "application/json").jobs()
    assert [(item.id, item.gpus) for item in found.items] == [("a", 8)]
    # a field it knows, of the wrong kind, is still not this API's answer
    broken = {**page, "items": [{**row, "gpus": "eight"}]}
    with pytest.raises(ClientError, match="not this API's answer"):
        answering(200, json.dumps(broken).encode(), "application/json").jobs()


@pytest.mark.parametrize("content", [b"[]", b"<h1>oops</h1>", b'"text"'])
def test_an_error_answer_without_topoqs_detail_keeps_its_status(
    answering: Any, content: bytes
) -> None:
    with pytest.raises(ClientError) as raised:
        answering(404, content, "application/json").job("x")
    assert raised.value.status == 404 and "404 Not Found" in str(raised.value)


@pytest.mark.parametrize("server", ["http://127.0.0.1:port", "ftp://127.0.0.1:8750", "http://"])
def test_a_server_url_the_client_cannot_use_is_bad_input(server: str) -> None:
    with pytest.raises(InvalidInputError):
        TopoqClient(server, None)


def test_a_token_that_cannot_be_a_header_is_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="one line of printable text"):
        TopoqClient("http://127.0.0.1:8750", "abc\r\nX-Injected: 1")


def test_a_server_that_is_not_listening_cannot_be_reached() -> None:
    with pytest.raises(ClientError, match="cannot reach the topoq server") as raised:
        TopoqClient(f"http://127.0.0.1:{free_port()}", None).teams()
    assert raised.value.status is None
