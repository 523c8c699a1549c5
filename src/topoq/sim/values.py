"""Values a scenario file gives: times in seconds, paths relative to the file, known names."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from pathlib import Path

from topoq.discovery.documents import Fields
from topoq.domain.errors import InvalidInputError

MAX_TIME_S = 100_000_000
"""Every time and duration of a scenario (a little over three years), so that the virtual
clock stays exact and a run ends."""


def seconds(fields: Fields, key: str, *, positive: bool = False) -> float:
    """A time or duration in seconds: a finite number from 0 (above 0 when ``positive``) up
    to ``MAX_TIME_S``."""
    value = fields.required(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(
            f"expected a number of seconds, got {value!r:.60}", where=fields.path(key)
        )
    if not math.isfinite(value):
        raise InvalidInputError(
            f"{value!r} is not a finite number", where=fields.path(key), hint="give seconds"
        )
    if value < 0 or (positive and value == 0) or value > MAX_TIME_S:
        bound = "greater than 0" if positive else "0 or more"
        raise InvalidInputError(
            f"is {value}",
            where=fields.path(key),
            hint=f"give a number of seconds {bound}, up to {MAX_TIME_S:,}",
        )
    return float(value)


def optional_seconds(fields: Fields, key: str, *, positive: bool = False) -> float | None:
    return seconds(fields, key, positive=positive) if fields.has(key) else None


def count(
    fields: Fields,
    key: str,
    default: int | None = None,
    *,
    least: int = 1,
    most: int | None = None,
) -> int:
    """A whole number of at least ``least`` (and at most ``most``); what is not one is refused
    with this field's own bounds (not those of any 64-bit number)."""
    hint = (
        f"give a whole number of {least} or more"
        if most is None
        else f"give a whole number from {least} to {most:,}"
    )
    try:
        value = fields.integer(key, default)
    except InvalidInputError as error:
        raise InvalidInputError(error.message, where=error.where, hint=hint) from None
    if value < least or (most is not None and value > most):
        raise InvalidInputError(f"is {value}", where=fields.path(key), hint=hint)
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
