"""Every error a client sees has one shape, ``{"detail": {"message", "where", "hint"}}``, and
no traceback ever reaches it: unexpected errors are logged and answered with a generic 500."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from topoq.api.request_body import BodyRefused
from topoq.domain.errors import InvalidInputError
from topoq.engine.ports import DuplicateJob, UnknownJob
from topoq.store.errors import ConcurrentUpdate
from topoq.wire.v1 import ErrorBody, ErrorDetail

log = logging.getLogger("topoq.api")


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


def _on(
    app: FastAPI, kind: type[Raised], render: Callable[[Request, Raised], JSONResponse]
) -> None:
    async def handle(request: Request, error: Exception) -> Response:
        if not isinstance(error, kind):  # Starlette dispatches by type; this cannot happen
            raise error
        return render(request, error)

    app.add_exception_handler(kind, handle)


def _api_error(request: Request, error: ApiError) -> JSONResponse:
    return error_response(error.status, error.detail, error.headers)


def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    return error_response(422, validation_detail(error.errors()))


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


def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    message = error.detail if isinstance(error.detail, str) else "request failed"
    if error.status_code == 400 and message == BODY_NOT_PARSED:
        detail = ErrorDetail(
            message="the body is not valid JSON", where="body", hint="send a JSON body in UTF-8"
        )
        return error_response(422, detail)
    if error.status_code == 404 and message == "Not Found":
        message = f"no route {request.method} {request.url.path}"
        return error_response(404, ErrorDetail(message=message, hint="see /docs"))
    if error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(error.status_code, ErrorDetail(message=message), error.headers)


def _body_refused(request: Request, error: BodyRefused) -> JSONResponse:
    return error_response(error.status_code, error.error_detail)


def _invalid_input(request: Request, error: InvalidInputError) -> JSONResponse:
    return error_response(
        422, ErrorDetail(message=error.message, where=error.where, hint=error.hint)
    )


def _unknown_job(request: Request, error: UnknownJob) -> JSONResponse:
    return error_response(404, ErrorDetail(message=str(error), hint="list jobs with GET /jobs"))


def _duplicate_job(request: Request, error: DuplicateJob) -> JSONResponse:
    return error_response(
        409,
        ErrorDetail(
            message=str(error),
            where="id",
            hint="job ids are unique: give another id (or rename the document)",
        ),
    )


def _concurrent_update(request: Request, error: ConcurrentUpdate) -> JSONResponse:
    return error_response(409, ErrorDetail(message=str(error), hint="read it again and retry"))


UNREADABLE_INPUT: tuple[type[Exception], ...] = (ValueError, ArithmeticError, RecursionError)
"""What a reader of a document raises on input it did not foresee (a number Python will not
convert, a quantity ``Decimal`` cannot hold, nesting deeper than the stack): the input is at
fault, so the answer is a 422 — logged, since a reader should have named the field."""


def _unreadable_input(request: Request, error: Exception) -> JSONResponse:
    log.warning(
        "input refused by %s on %s %s", type(error).__name__, request.method, request.url.path,
        exc_info=error,
    )  # fmt: skip
    return error_response(
        422,
        ErrorDetail(
            message=f"the request cannot be read: {type(error).__name__}",
            hint="check the sizes and numbers of the request; the limits are in docs/api.md",
        ),
    )


def _unexpected(request: Request, error: Exception) -> JSONResponse:
    reference = uuid.uuid4().hex[:12]
    log.error(
        "unexpected error %s on %s %s", reference, request.method, request.url.path, exc_info=error
    )
    return error_response(
        500,
        ErrorDetail(
            message=f"internal error (reference {reference})",
            hint="the server log has the details under this reference",
        ),
    )
