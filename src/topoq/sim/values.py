"""Values a scenario file gives: times in seconds, paths relative to the file, known names."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from topoq.discovery.documents import Fields
from topoq.domain.errors import InvalidInputError


def seconds(fields: Fields, key: str, *, positive: bool = False) -> float:
    """A time or duration in seconds: a number >= 0 (> 0 when ``positive``)."""
    value = fields.required(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
            f"expected a number of seconds, got {value!r}", where=fields.path(key)
        )
    if value < 0 or (positive and value == 0):
        bound = "greater than 0" if positive else "0 or more"
        raise InvalidInputError(
            f"is {value}", where=fields.path(key), hint=f"give a number of seconds {bound}"
        )
    return float(value)


def optional_seconds(fields: Fields, key: str, *, positive: bool = False) -> float | None:
    return seconds(fields, key, positive=positive) if fields.has(key) else None


def count(fields: Fields, key: str, default: int | None = None, *, least: int = 1) -> int:
    """A whole number of at least ``least``."""
    value = fields.integer(key, default)
    if value < least:
        raise InvalidInputError(
            f"is {value}", where=fields.path(key), hint=f"give a whole number of {least} or more"
        )
    return value


def relative_path(base: Path, value: str, where: str) -> Path:
    """``value`` resolved against the scenario's directory; it must name a file."""
    path = base / value
    if not path.is_file():
        raise InvalidInputError(
            f"file {value!r} not found (looked for {path})",
            where=where,
            hint="paths are relative to the scenario file",
        )
    return path


def unknown_name(
    kind: str, name: str, known: Sequence[str], where: str, hint: str
) -> InvalidInputError:
    """An error for a name that is not defined, suggesting the closest known one."""
    close = difflib.get_close_matches(name, list(known), n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return InvalidInputError(f"{kind} {name!r} is unknown", where=where, hint=f"{guess}{hint}")


def names(fields: Fields, key: str) -> tuple[str, ...]:
    """A list of names, or a single name."""
    value = fields.raw(key)
    items = [value] if isinstance(value, str) else fields.items(key)
    for index, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise InvalidInputError(
                f"expected a job id, got {item!r}", where=f"{fields.path(key)}[{index}]"
            )
    return tuple(items)
