"""What the store raises besides the engine ports' ``DuplicateJob`` and ``UnknownJob``."""

from __future__ import annotations

from topoq.domain.errors import TopoqError


class ConcurrentUpdate(TopoqError):
    """Another writer changed a job (or the policy) after this writer read it. Nothing of the
    transaction was written; read the current state again and redo the change."""


class UnknownToken(TopoqError):
    """No API token has this id."""


class StoreUnavailable(TopoqError):
    """The database cannot be reached or opened (the message names it, password hidden)."""
