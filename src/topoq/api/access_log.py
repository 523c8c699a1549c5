"""The access log (``topoq server --access-log``): one ``request`` event per HTTP request with
its method, path, status, duration and the name of the token it acted as (``-`` without one).
The token itself, the query string and the body are never logged.

``authenticate`` notes the principal's name in the request's state (``PRINCIPAL_STATE``),
which the middleware reads once the answer has been sent."""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from topoq.engine.event_log import ServerEvent, write_event

ACCESS_LOGGER = "topoq.access"
PRINCIPAL_STATE = "principal"
"""The key of the principal's name in the ASGI scope's ``state``."""
NO_RESPONSE = 500
"""The status logged when the application failed before it began an answer."""

log = logging.getLogger(ACCESS_LOGGER)


class AccessLog:
    """ASGI middleware: one record per HTTP request, after it was answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        began = time.perf_counter()
        status = NO_RESPONSE

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            duration_ms = (time.perf_counter() - began) * 1000
            write_event(log, request_event(scope, status, duration_ms, state))


def request_event(
    scope: Scope, status: int, duration_ms: float, state: dict[str, Any]
) -> ServerEvent:
    method, path = str(scope.get("method", "")), str(scope.get("path", ""))
    principal = str(state.get(PRINCIPAL_STATE) or "-")
    return ServerEvent(
        "request",
        f"{method} {path} {status} {duration_ms:.1f} ms ({principal})",
        {
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(duration_ms, 1),
            "principal": principal,
        },
    )
