"""Domain errors. Every message says what is wrong, where, and what to do about it."""

from __future__ import annotations


class TopoqError(Exception):
    """Base class of every error topoq raises on purpose."""


class InvalidInputError(TopoqError):
    """Input that topoq cannot use: a malformed file, an unknown name, an impossible request.

    ``where`` names the place (a file and line, a node, a pod set); ``hint`` says how to fix it.
    """

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None) -> None:
        self.message = message
        self.where = where
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def located(self, where: str) -> InvalidInputError:
        """The same error, with ``where`` prefixed by an outer location (e.g. a file name)."""
        inner = f"{where}: {self.where}" if self.where else where
        return type(self)(self.message, where=inner, hint=self.hint)


class TopologyError(InvalidInputError):
    """A topology that cannot be built: a cycle, a node in two leaves, mixed depths, …"""


class InvalidRequestError(InvalidInputError):
    """A workload whose request cannot be evaluated (unknown level, bad slice size, …)."""
