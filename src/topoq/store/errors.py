"""What the store raises besides the engine ports' ``DuplicateJob`` and ``UnknownJob`` (and
``ConcurrentUpdate`` and ``StoreUnavailable``, which the engine handles, re-exported here)."""

from __future__ import annotations

from topoq.domain.errors import TopoqError
from topoq.engine.ports import ConcurrentUpdate, StoreUnavailable

__all__ = ["ConcurrentUpdate", "DuplicateToken", "StoreUnavailable", "UnknownToken", "first_line"]


class UnknownToken(TopoqError):
    """No API token has this id."""


class DuplicateToken(TopoqError):
    """A token has (or had: revoked tokens keep their names) this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"a token named {name!r} exists or existed")
        self.name = name


def first_line(error: BaseException) -> str:
    """The first line of a database error's own message (the driver's, when wrapped)."""
    cause = getattr(error, "orig", None) or error
    text = str(cause).strip()
    return text.splitlines()[0] if text else type(error).__name__
