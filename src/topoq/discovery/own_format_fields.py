"""Field readers shared by topoq's own file formats (policy, job file): keys in camelCase or
snake_case
(``fairShareWeight`` or ``fair_share_weight``), enum values, bounded integers and resource
amounts that keep explicit zeros."""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import TypeVar

from topoq.discovery.documents import Fields
from topoq.domain.durations import duration_s
from topoq.domain.errors import InvalidInputError
from topoq.domain.resources import Resources

_CAMEL_HUMP = re.compile(r"(?<!^)(?=[A-Z])")

Choice = TypeVar("Choice", bound=StrEnum)


def snake_case(camel: str) -> str:
    return _CAMEL_HUMP.sub("_", camel).lower()


def spelling(fields: Fields, camel: str) -> str:
    """The spelling of ``camel`` that ``fields`` uses: camelCase, or else snake_case."""
    snake = snake_case(camel)
    if snake != camel and fields.has(camel) and fields.has(snake):
        raise InvalidInputError(
            f"both {camel!r} and {snake!r} are given", where=fields.where, hint="keep one"
        )
    return snake if fields.has(snake) else camel


def reject_unknown_keys(fields: Fields, allowed: Sequence[str], *, snake: bool = True) -> None:
    """Fail on a key that is not in ``allowed`` (nor, with ``snake``, its snake_case form)."""
    spellings = {form for key in allowed for form in (key, snake_case(key) if snake else key)}
    fields.reject_unknown_keys(spellings, listed=allowed)


def choice(fields: Fields, key: str, kind: type[Choice], default: Choice) -> Choice:
    """The enum value named by ``fields[key]``, in any letter case; an unknown value lists the
    allowed ones."""
    if not fields.has(key):
        return default
    text = fields.text(key)
    for member in kind:
        if member.value.lower() == text.lower():
            return member
    raise InvalidInputError(
        f"unknown value {text!r}",
        where=fields.path(key),
        hint=f"use one of {', '.join(member.value for member in kind)}",
    )


def bounded(fields: Fields, key: str, lowest: int, highest: int, default: int | None = None) -> int:
    """An integer from ``lowest`` to ``highest``; required when there is no default."""
    value = fields.integer(key, default)
    if not lowest <= value <= highest:
        raise InvalidInputError(
            f"{value} is out of range", where=fields.path(key), hint=f"use {lowest} to {highest}"
        )
    return value


def amounts_given(fields: Fields) -> dict[str, int]:
    """Every resource the mapping names, in canonical units, zeros included."""
    parsed = Resources.parse(fields.data, where=fields.where)
    return {str(name): parsed.amount(str(name)) for name in fields.data}


def optional_duration(fields: Fields, camel: str, *, allow_zero: bool = False) -> float | None:
    """A duration field (seconds, ``90m``, ``2h``, ``1-00:00:00``) in seconds, or None when
    absent; either spelling of ``camel`` is read."""
    key = spelling(fields, camel)
    if not fields.has(key):
        return None
    return duration_s(fields.raw(key), where=fields.path(key), allow_zero=allow_zero)
