"""The FastAPI application: routes under ``/api/v1``, ``/healthz`` outside, one error shape."""

from __future__ import annotations

import warnings

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from topoq import __version__
from topoq.api import (
    routes_access,
    routes_cluster,
    routes_jobs,
    routes_records,
    routes_reports,
    routes_web,
)
from topoq.api.access_log import AccessLog
from topoq.api.errors import install_error_handlers
from topoq.api.request_body import BodySizeLimit
from topoq.api.service import Service
from topoq.domain.limits import MAX_REQUEST_BYTES
from topoq.wire.v1 import ErrorBody

warnings.filterwarnings(
    "ignore",
    message=r"The 'alias' attribute with value '\w+' was provided to the `Field\(\)` function",
    category=UserWarning,
)
"""FastAPI passes a body parameter to pydantic as ``Annotated[Model, Body(alias=name)]`` and
keeps the alias itself; with the wire models' validators built on first use
(``defer_build``, ADR 0010) pydantic warns, when it builds them, that the alias has no effect
there — true and harmless, and it would be a line of noise in the server log."""

API_PREFIX = "/api/v1"
DOCS_ASSETS = "/docs/assets"
"""Where ``/docs`` and ``/redoc`` load Swagger UI's and ReDoc's scripts from (shipped by
``fastapi-offline``, served without a token like the pages)."""
_ERRORS = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (401, "No API token, or one that is not valid"),
        (403, "The token's role or teams do not allow it"),
        (404, "No such job, node or route"),
        (409, "The job's state, or an id already taken, does not allow it"),
        (413, "The request body is larger than the API reads (4 MiB)"),
        (422, "A field is not valid; `where` names it, `hint` says what is allowed"),
    )
}


def create_app(service: Service, *, access_log: bool = False) -> FastAPI:
    """The API on ``service``; with ``access_log``, a ``request`` event per HTTP request."""
    app = FastAPIOffline(  # /docs and /redoc from assets in the package: no CDN, no internet
        static_url=DOCS_ASSETS,
        title="topoq",
        version=__version__,
        summary="Topology-aware gang scheduler and governance control plane",
        description="See docs/api.md: routes, roles, the error shape, limits and tokens.",
    )
    app.add_middleware(BodySizeLimit, limit_bytes=MAX_REQUEST_BYTES)
    if access_log:
        app.add_middleware(AccessLog)  # outermost: it times and sees every answer
    app.state.service = service
    install_error_handlers(app)
    app.include_router(routes_records.health_router)
    app.include_router(routes_web.router)  # the dashboard's page and files (ADR 0013)
    routers = (routes_jobs, routes_cluster, routes_records, routes_reports, routes_access)
    for module in routers:
        app.include_router(module.router, prefix=API_PREFIX, responses=_ERRORS)  # type: ignore[arg-type]  # FastAPI types the mapping loosely
    return app
