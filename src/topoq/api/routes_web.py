"""The dashboard (ADR 0013): ``GET /`` is its page and ``GET /ui/{asset}`` its files, with no
token — they hold no data; the page asks ``/api/v1`` for everything it shows, with the token
the user signs in with."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from topoq.api.errors import ApiError
from topoq.api.request_body import StrictJsonRoute
from topoq.web import asset

router = APIRouter(tags=["dashboard"], route_class=StrictJsonRoute)

_REVALIDATED = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
"""Revalidated on every load (a new version's files are seen at once), never sniffed."""


@router.get("/", include_in_schema=False)
def page() -> Response:
    """The dashboard's page."""
    return _served("index.html")


@router.get("/ui/{name}", include_in_schema=False)
def ui_asset(name: str) -> Response:
    """One of the page's files (scripts, the style sheet)."""
    return _served(name)


def _served(name: str) -> Response:
    found = asset(name)
    if found is None:
        raise ApiError(404, f"no dashboard file named {name!r}", hint="open / for the dashboard")
    body, media_type = found
    return Response(
        body,
        media_type=media_type,
        headers=_REVALIDATED | {"Content-Security-Policy": _POLICY},
    )


_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
"""Only the server's own files and API: no inline script, nothing from elsewhere."""
