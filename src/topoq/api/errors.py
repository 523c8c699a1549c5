"""Every error a client sees has one shape, ``{"detail": {"message", "where", "hint"}}``, and
no traceback ever reaches it: unexpected errors are logged and answered with a generic 500.

Every error answer is an ``api_error`` event in the server log (status, code, method, path,
message, where): a 5xx at ERROR with its traceback (in the log only), input a reader did not
foresee at WARNING with its traceback, any other 4xx at INFO."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from topoq.api.request_body import BodyRefused
from topoq.domain.errors import InvalidInputError
from topoq.engine.event_log import ServerEvent, write_event
from topoq.engine.ports import DuplicateJob, UnknownJob
from topoq.store.errors import ConcurrentUpdate
from topoq.wire.v1 import ErrorBody, ErrorDetail

ERRORS_LOGGER = "topoq.api"
log = logging.getLogger(ERRORS_LOGGER)


class ApiError(Exception):
    """An answer other than 2xx, raised from a route."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        where: str | None = None,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.detail = ErrorDetail(message=message, where=where, hint=hint)
        self.headers = headers


def conflict(error: InvalidInputError) -> ApiError:
    """A request that is well formed but does not fit the job's state (409)."""
    return ApiError(409, error.message, where=error.where, hint=error.hint)


def error_response(
    status: int, detail: ErrorDetail, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = ErrorBody(detail=detail).model_dump(mode="json", exclude_none=True)
    return JSONResponse(body, status_code=status, headers=headers)


@dataclass(frozen=True)
class ErrorAnswer:
    """What a handler answers, and how loudly the log tells it."""

    status: int
    detail: ErrorDetail
    headers: Mapping[str, str] | None = None
    level: int = logging.INFO
    traceback: bool = False
    """Whether the error's traceback goes into the log."""


ERROR_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    422: "invalid_request",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
}
"""The ``code`` of an ``api_error`` event: a name for its status."""


def api_error_event(request: Request, answer: ErrorAnswer) -> ServerEvent:
    status, detail = answer.status, answer.detail
    return ServerEvent(
        "api_error",
        detail.message,
        {
            "status": status,
            "code": ERROR_CODES.get(status, f"http_{status}"),
            "method": request.method,
            "path": request.url.path,
            "where": detail.where,
        },
        answer.level,
    )


def install_error_handlers(app: FastAPI) -> None:
    _on(app, ApiError, _api_error)
    _on(app, RequestValidationError, _validation_error)
    _on(app, StarletteHTTPException, _http_error)
    _on(app, BodyRefused, _body_refused)
    _on(app, InvalidInputError, _invalid_input)
    _on(app, UnknownJob, _unknown_job)
    _on(app, DuplicateJob, _duplicate_job)
    _on(app, ConcurrentUpdate, _concurrent_update)
    for unreadable in UNREADABLE_INPUT:
        _on(app, unreadable, _unreadable_input)
    _on(app, Exception, _unexpected)


Raised = TypeVar("Raised", bound=Exception)


def _on(app: FastAPI, kind: type[Raised], render: Callable[[Request, Raised], ErrorAnswer]) -> None:
    async def handle(request: Request, error: Exception) -> Response:
        if not isinstance(error, kind):  # Starlette dispatches by type; this cannot happen
            raise error
        answer = render(request, error)
        event = api_error_event(request, answer)
        write_event(log, event, exc_info=error if answer.traceback else None)
        return error_response(answer.status, answer.detail, answer.headers)

    app.add_exception_handler(kind, handle)


def _api_error(request: Request, error: ApiError) -> ErrorAnswer:
    return ErrorAnswer(error.status, error.detail, error.headers)


def _validation_error(request: Request, error: RequestValidationError) -> ErrorAnswer:
    return ErrorAnswer(422, validation_detail(error.errors()))


def validation_detail(errors: Sequence[Any]) -> ErrorDetail:
    """The first problem pydantic found, named by its field path (``body.maxRetry``)."""
    if not errors:
        return ErrorDetail(message="the request is not valid")
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    others = len(errors) - 1
    message = str(first.get("msg", "is not valid"))
    if others:
        message += f" (and {others} more problem{'s' if others > 1 else ''})"
    return ErrorDetail(message=message, where=where or None, hint=_allowed(first))


def _allowed(error: Any) -> str | None:
    context = error.get("ctx") or {}
    if "expected" in context:
        return f"allowed: {context['expected']}"
    kind = str(error.get("type", ""))
    hints = {
        "missing": "add this field",
        "extra_forbidden": "remove this field; it is not part of the request",
        "json_invalid": "send a JSON body",
        "model_attributes_type": "send a JSON object",
        "dict_type": "send a JSON object",
    }
    return hints.get(kind)


BODY_NOT_PARSED = "There was an error parsing the body"
"""FastAPI's 400 for a body it cannot decode (not UTF-8): answered like any JSON error."""


def _http_error(request: Request, error: StarletteHTTPException) -> ErrorAnswer:
    message = error.detail if isinstance(error.detail, str) else "request failed"
    if error.status_code == 400 and message == BODY_NOT_PARSED:
        detail = ErrorDetail(
            message="the body is not valid JSON", where="body", hint="send a JSON body in UTF-8"
        )
        return ErrorAnswer(422, detail)
    if error.status_code == 404 and message == "Not Found":
        message = f"no route {request.method} {request.url.path}"
        return ErrorAnswer(404, ErrorDetail(message=message, hint="see /docs"))
    if error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return ErrorAnswer(error.status_code, ErrorDetail(message=message), error.headers)


def _body_refused(request: Request, error: BodyRefused) -> ErrorAnswer:
    return ErrorAnswer(error.status_code, error.error_detail)


def _invalid_input(request: Request, error: InvalidInputError) -> ErrorAnswer:
    return ErrorAnswer(422, ErrorDetail(message=error.message, where=error.where, hint=error.hint))


def _unknown_job(request: Request, error: UnknownJob) -> ErrorAnswer:
    return ErrorAnswer(404, ErrorDetail(message=str(error), hint="list jobs with GET /jobs"))


def _duplicate_job(request: Request, error: DuplicateJob) -> ErrorAnswer:
    return ErrorAnswer(
        409,
        ErrorDetail(
            message=str(error),
            where="id",
            hint="job ids are unique: give another id (or rename the document)",
        ),
    )


def _concurrent_update(request: Request, error: ConcurrentUpdate) -> ErrorAnswer:
    return ErrorAnswer(409, ErrorDetail(message=str(error), hint="read it again and retry"))


UNREADABLE_INPUT: tuple[type[Exception], ...] = (ValueError, ArithmeticError, RecursionError)
"""What a reader of a document raises on input it did not foresee (a number Python will not
convert, a quantity ``Decimal`` cannot hold, nesting deeper than the stack): the input is at
fault, so the answer is a 422 — logged, since a reader should have named the field."""


def _unreadable_input(request: Request, error: Exception) -> ErrorAnswer:
    return ErrorAnswer(
        422,
        ErrorDetail(
            message=f"the request cannot be read: {type(error).__name__}",
            hint="check the sizes and numbers of the request; the limits are in docs/api.md",
        ),
        level=logging.WARNING,
        traceback=True,
    )


def _unexpected(request: Request, error: Exception) -> ErrorAnswer:
    reference = uuid.uuid4().hex[:12]
    return ErrorAnswer(
        500,
        ErrorDetail(
            message=f"internal error (reference {reference})",
            hint="the server log has the details under this reference",
        ),
        level=logging.ERROR,
        traceback=True,
    )
