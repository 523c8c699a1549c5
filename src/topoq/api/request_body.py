"""Request bodies read once and strictly, before any route sees them.

Python's ``json.loads`` — which FastAPI uses — guesses UTF-16 and UTF-32, takes ``Infinity``
and ``NaN``, lets the last of two equal keys win and nests as deep as the stack allows. Every
router of the API is made with ``route_class=StrictJsonRoute`` (FastAPI's custom route and
request pattern), so a JSON body is parsed here instead: UTF-8 only, no duplicate key, no
constant that is not a number, no integer of more digits than ``MAX_INTEGER_DIGITS``, no NUL
(PostgreSQL cannot store one), and then :func:`topoq.domain.limits.check_document` for depth,
entries and string lengths. ``BodySizeLimit`` (middleware of the app) counts the bytes as
they arrive and refuses a body over ``MAX_REQUEST_BYTES`` with a 413 before more of it is read
(at once when its ``Content-Length`` says so; chunked bodies as the count passes the limit).
Path and query parameters are checked for NUL here too, so that no request string reaches the
store with one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from topoq.discovery.document_parsers import DuplicateKey, HugeInteger, bounded_int, unique_pairs
from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import (
    MAX_DEPTH,
    MAX_INTEGER_DIGITS,
    MAX_REQUEST_BYTES,
    check_document,
    short_path,
)
from topoq.wire.v1 import ErrorBody, ErrorDetail

BODY = "body"
_JSON_HINT = "send one JSON value encoded in UTF-8 (RFC 8259)"
_LONG_DIGITS = re.compile(rf"[0-9]{{{MAX_INTEGER_DIGITS + 1}}}")
_NUL_HINT = "no text topoq stores may hold a NUL (\\u0000)"


class BodyRefused(HTTPException):
    """A body refused while it is read. FastAPI lets only HTTP errors out of its body reading
    (anything else becomes a bare 400), so the refusal travels as one, with its detail."""

    def __init__(self, status: int, error: InvalidInputError) -> None:
        super().__init__(status_code=status, detail=error.message)
        self.error_detail = ErrorDetail(message=error.message, where=error.where, hint=error.hint)


def body_too_large(limit_bytes: int = MAX_REQUEST_BYTES) -> InvalidInputError:
    return InvalidInputError(
        f"the request body is larger than {limit_bytes / 2**20:g} MiB",
        where=BODY,
        hint="send a smaller body: a job or policy document is far below this limit",
    )


class BodySizeLimit:
    """ASGI middleware: a request body over ``limit_bytes`` is refused with a 413 while it is
    read, so that no more than the limit (and one chunk) is ever held."""

    def __init__(self, app: ASGIApp, limit_bytes: int = MAX_REQUEST_BYTES) -> None:
        self.app = app
        self.limit_bytes = limit_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit_bytes:
            detail = BodyRefused(413, body_too_large(self.limit_bytes)).error_detail
            body = ErrorBody(detail=detail).model_dump(mode="json", exclude_none=True)
            await JSONResponse(body, status_code=413)(scope, receive, send)
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit_bytes:
                    raise BodyRefused(413, body_too_large(self.limit_bytes))
            return message

        await self.app(scope, counted_receive, send)


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            try:
                self._json = parse_json_body(await self.body())
            except InvalidInputError as error:
                raise BodyRefused(422, error) from None
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose body is read by :class:`StrictJsonRequest` and whose path and query
    parameters hold no NUL."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        takes_body = self.body_field is not None

        async def strict_handler(request: Request) -> Response:
            refuse_nul_parameters(request)
            scope = request.scope
            if takes_body:
                scope = read_as_json(request)
            return await handler(StrictJsonRequest(scope, request.receive))

        return strict_handler


def read_as_json(request: Request) -> Scope:
    """The request's scope, once its body is known to be read as JSON. A body sent as anything
    else is refused for what it is: without this, a form (what ``curl -d`` sends) reaches the
    route as no object at all, and the answer would only say that the body is not one. A body
    without a ``Content-Type`` is read as JSON (FastAPI would read it as none)."""
    declared = request.headers.get("content-type")
    if declared is None:
        headers = [*request.scope["headers"], (b"content-type", b"application/json")]
        return {**request.scope, "headers": headers}
    media = declared.split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return request.scope
    raise InvalidInputError(
        f"the body is sent as {media or 'an empty media type'!r}, not as JSON",
        where="headers.content-type",
        hint="send it with Content-Type: application/json (with curl: "
        "-H 'Content-Type: application/json'; curl's -d alone sends a form)",
    )


def refuse_nul_parameters(request: Request) -> None:
    """Path and query parameters (names and values) reach store queries: none holds a NUL."""
    named = [(f"path.{k}", v) for k, v in request.path_params.items()]
    named += [(f"query.{k}", f"{k}{v}") for k, v in request.query_params.multi_items()]
    for where, value in named:
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInputError(
                "holds a NUL character", where=where.replace("\x00", "\\x00"), hint=_NUL_HINT
            )


def parse_json_body(body: bytes) -> object:
    """The JSON value of ``body``; ``InvalidInputError`` naming what to fix otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"the body is not UTF-8 (byte {error.start} is {body[error.start]:#04x})",
            where=BODY,
            hint=_JSON_HINT,
        ) from None
    if text.startswith("\ufeff"):
        raise InvalidInputError(
            "the body starts with a byte order mark", where=BODY, hint=_JSON_HINT
        )
    # Integers are bounded by a hook only when the text has a run of digits that long: the
    # hook is a Python call per number, and such a run is rare (it may sit in a string).
    long_digits = _LONG_DIGITS.search(text) is not None
    try:
        value = json.loads(
            text,
            object_pairs_hook=unique_pairs,
            parse_constant=_refuse_constant,
            parse_int=bounded_int if long_digits else None,
        )
    except DuplicateKey as duplicate:
        raise InvalidInputError(
            f"the key {duplicate.key!r} appears twice in one object",
            where=BODY,
            hint="give each key once (JSON readers disagree on which one would count)",
        ) from None
    except HugeInteger as huge:
        raise InvalidInputError(
            f"a number of {huge.digits:,} digits",
            where=BODY,
            hint=f"numbers have at most {MAX_INTEGER_DIGITS} digits",
        ) from None
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            f"the body is not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})",
            where=BODY,
            hint=_JSON_HINT,
        ) from None
    except RecursionError:
        raise _too_deep() from None
    check_document(value, where=BODY)
    if "\\u0000" in text:
        _refuse_nul(value)
    return value


def _refuse_constant(name: str) -> object:
    raise InvalidInputError(
        f"{name} is not a number JSON allows", where=BODY, hint="give a finite number"
    )


def _too_deep() -> InvalidInputError:
    return InvalidInputError(
        f"the body is nested more than {MAX_DEPTH} levels deep",
        where=BODY,
        hint=f"request bodies are at most {MAX_DEPTH} objects or arrays deep",
    )


def _refuse_nul(value: object) -> None:
    """Raise naming the first key or string holding a NUL (``check_document`` has bounded the
    depth, so the walk is short)."""
    stack: list[tuple[object, str]] = [(value, BODY)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    raise InvalidInputError(
                        "a key holds a NUL character", where=short_path(path), hint=_NUL_HINT
                    )
                stack.append((child, f"{path}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
        elif isinstance(item, str) and "\x00" in item:
            raise InvalidInputError("holds a NUL character", where=short_path(path), hint=_NUL_HINT)
