"""What the store raises besides the engine ports' ``DuplicateJob`` and ``UnknownJob``."""

from __future__ import annotations

from topoq.domain.errors import TopoqError
from topoq.engine.ports import ConcurrentUpdate

__all__ = ["ConcurrentUpdate", "StoreUnavailable", "UnknownToken"]


class UnknownToken(TopoqError):
    """No API token has this id."""


class StoreUnavailable(TopoqError):
    """The database cannot be reached or opened (the message names it, password hidden)."""
