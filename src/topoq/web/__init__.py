"""The web dashboard's files (ADR 0013): a page and plain JavaScript modules, served as they
are by the API app (``topoq.api.routes_web``) with no build step; every figure they show comes
from the REST API with the signed-in token."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""``index.html`` and the assets it loads (``/ui/{asset}``)."""

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
"""The kinds of file the folder holds, and how each is served (anything else is not)."""


def asset(name: str) -> tuple[bytes, str] | None:
    """The file ``name`` of the folder and its media type; None when there is no such file
    directly in it (no subfolders, no path outside it, no other kind of file)."""
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    path = STATIC_DIR / name
    media_type = MEDIA_TYPES.get(path.suffix)
    if media_type is None or not path.is_file():
        return None
    return path.read_bytes(), media_type
