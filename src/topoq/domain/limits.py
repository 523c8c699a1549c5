"""Limits every input is checked against before any work is done on it.

A document (a job, a policy, a cluster file, a scenario, a request body) is read by a parser
and then walked once by ``check_document``: too deep, too many entries, a string or a number
too long, a number that is not finite — each is an ``InvalidInputError`` naming the limit and
where it was hit. Readers of each format add their own counts (teams, nodes, jobs) on top.
docs/api.md and docs/formats.md list the limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from topoq.domain.errors import InvalidInputError

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""A file or request body topoq reads whole (16 MiB)."""
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""A request body of the REST API (4 MiB)."""
DEFAULT_LOG_READ_BYTES = 1 << 20
"""What one read of a job's logs returns when it does not say (1 MiB)."""
MAX_LOG_READ_BYTES = 16 << 20
"""What one read of a job's logs returns at most (16 MiB), whatever it asks."""
MAX_DEPTH = 64
"""Mappings and lists nested in one another."""
MAX_ENTRIES = 1_000_000
"""Mapping entries and list items in a whole document."""
MAX_STRING_CHARS = 1024 * 1024
"""One string value (1 Mi characters)."""
MAX_KEY_CHARS = 1024
"""One mapping key."""
MAX_INTEGER_DIGITS = 30
"""A whole number: far beyond any count or amount (2**63 has 19 digits)."""
MAX_CLUSTER_NODES = 100_000
"""Nodes in one cluster description (generated, listed or read from a topology.conf)."""


@dataclass(frozen=True)
class DocumentLimits:
    max_depth: int = MAX_DEPTH
    max_entries: int = MAX_ENTRIES
    max_string_chars: int = MAX_STRING_CHARS
    max_key_chars: int = MAX_KEY_CHARS
    max_integer_digits: int = MAX_INTEGER_DIGITS


DEFAULT_LIMITS = DocumentLimits()


def check_document(value: object, *, where: str, limits: DocumentLimits = DEFAULT_LIMITS) -> None:
    """Walk a parsed JSON/YAML value without recursion; raise at the first limit it breaks.

    Accepts only what JSON can say: mappings with string keys, lists, strings, booleans,
    finite numbers and null (YAML dates, sets and other tags are refused). With ``where``
    empty, paths start at the first key (``items[3].name``)."""
    entries = 0
    stack: list[tuple[object, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, Mapping | list):
            if depth >= limits.max_depth:
                raise InvalidInputError(
                    f"nested more than {limits.max_depth} levels deep",
                    where=short_path(path),
                    hint="documents topoq reads are at most "
                    f"{limits.max_depth} mappings or lists deep",
                )
            entries += len(item)
            if entries > limits.max_entries:
                raise InvalidInputError(
                    f"more than {limits.max_entries:,} entries",
                    where=where,
                    hint="split the document, or leave out what topoq does not read",
                )
            if isinstance(item, Mapping):
                for key, child in item.items():
                    _check_key(key, path, limits)
                    stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
            continue
        _check_scalar(item, path, limits)


def _check_key(key: object, path: str, limits: DocumentLimits) -> None:
    if not isinstance(key, str):
        raise InvalidInputError(
            f"a key is {type(key).__name__} {key!r:.40}, not a string",
            where=path,
            hint="quote the key",
        )
    if len(key) > limits.max_key_chars:
        raise InvalidInputError(
            f"a key of {len(key):,} characters",
            where=path,
            hint=f"keys are at most {limits.max_key_chars:,} characters",
        )


def _check_scalar(item: object, path: str, limits: DocumentLimits) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, str):
        if len(item) > limits.max_string_chars:
            raise InvalidInputError(
                f"a string of {len(item):,} characters",
                where=path,
                hint=f"strings are at most {limits.max_string_chars:,} characters",
            )
        return
    if isinstance(item, int):
        if _too_many_digits(item, limits.max_integer_digits):
            raise InvalidInputError(
                f"a number of more than {limits.max_integer_digits} digits",
                where=path,
                hint="give a number a cluster can hold",
            )
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidInputError(
                f"{item!r} is not a finite number", where=path, hint="give a finite number"
            )
        return
    raise InvalidInputError(
        f"a {type(item).__name__} value, which JSON cannot hold",
        where=path,
        hint="write it as a string, a number, a boolean, a list or a mapping",
    )


def _too_many_digits(value: int, digits: int) -> bool:
    bound: int = 10**digits
    return abs(value) >= bound


def short_path(path: str, limit: int = 120) -> str:
    """A field path for a message, its middle cut when it is long (deep nesting)."""
    return path if len(path) <= limit else f"{path[: limit // 2]}…{path[-limit // 2 :]}"
