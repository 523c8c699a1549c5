"""Slurm hostlist expressions: ``p5-[001-016,020]`` ⇄ the node names they stand for.

Expansion follows Slurm: a comma at the top level separates items; inside brackets, a comma
separates ranges. A range ``lo-hi`` is zero padded to the width of ``lo`` (``[08-10]`` gives
``08 09 10``, ``[8-10]`` gives ``8 9 10``). Several bracket groups in one item expand as a
cartesian product, the leftmost varying slowest (``r[1-2]-n[1-2]`` → ``r1-n1 r1-n2 r2-n1 r2-n2``).

Compression is the inverse for any set of names: names are grouped by the text before and after
their last run of digits, and consecutive numbers of a compatible width are folded into ranges.
``sorted(expand_hostlist(compress_hostlist(names))) == sorted(set(names))`` always holds, and the
expansion of a compressed list never repeats a name.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from topoq.domain.errors import InvalidInputError

MAX_EXPANDED_NAMES = 1_000_000
"""An expression standing for more names than this is refused (guards against typos)."""

HOSTLIST_SYNTAX_CHARACTERS = frozenset("[],")

_Ranges = list[list[tuple[int, int, int]]]
"""The ranges of each ``[...]`` of one item: (first, last, zero-padded width)."""
_DIGITS = re.compile(r"[0-9]+")
_BRACKET_GROUP = re.compile(r"\[([^\[\]]*)\]")
_LAST_NUMBER = re.compile(r"^(?P<prefix>.*?)(?P<digits>[0-9]+)(?P<suffix>[^0-9]*)$")
_SHOWN_CHARS = 60
_RANGE_HINT = "write ranges as lo-hi with decimal numbers, e.g. p5-[001-016,020]"


def expand_hostlist(expr: str) -> list[str]:
    """The names an expression stands for, in expression order; ``""`` stands for no names."""
    items = _items(expr)
    if sum(_item_size(ranges) for _, ranges in items) > MAX_EXPANDED_NAMES:
        raise _too_many(expr)
    return [name for literals, ranges in items for name in _names(literals, ranges)]


def hostlist_size(expr: str) -> int:
    """How many names an expression stands for, counted without building them."""
    return sum(_item_size(ranges) for _, ranges in _items(expr))


def _items(expr: str) -> list[tuple[list[str], _Ranges]]:
    text = expr.strip()
    if not text:
        return []
    if any(character.isspace() for character in text):
        raise InvalidInputError(
            f"hostlist {_shown(expr)} contains whitespace",
            hint="separate names with commas only, e.g. a1,b[1-3],c",
        )
    return [_parsed_item(item, text) for item in _top_level_items(text)]


def _item_size(ranges: _Ranges) -> int:
    total = 1
    for group in ranges:
        total *= sum(last - first + 1 for first, last, _ in group)
        if total > MAX_EXPANDED_NAMES:
            return total
    return total


def compress_hostlist(names: Iterable[str]) -> str:
    """A short hostlist expression for ``names``: duplicates dropped, groups in sorted order."""
    groups: dict[tuple[str, str], set[str]] = {}
    plain: set[str] = set()
    for name in names:
        _check_compressible(name)
        match = _LAST_NUMBER.match(name)
        if match is None:
            plain.add(name)
        else:
            groups.setdefault((match["prefix"], match["suffix"]), set()).add(match["digits"])
    items: list[tuple[tuple[str, int, str], str]] = [((name, -1, ""), name) for name in plain]
    for (prefix, suffix), digit_strings in groups.items():
        runs = _numeric_runs(digit_strings)
        sort_key = (prefix, int(runs[0].first), suffix)
        items.append((sort_key, _render_group(prefix, runs, suffix)))
    return ",".join(text for _, text in sorted(items))


def _top_level_items(text: str) -> list[str]:
    items: list[str] = []
    depth = 0
    start = 0
    for position, character in enumerate(text):
        if character == "[":
            if depth:
                raise InvalidInputError(
                    f"hostlist {_shown(text)} has a bracket inside brackets at position "
                    f"{position + 1}",
                    hint="brackets do not nest; write r[1-2]-n[1-4], not r[1-[2]]",
                )
            depth = 1
        elif character == "]":
            if not depth:
                raise _unbalanced(text, f"a ']' without a matching '[' at position {position + 1}")
            depth = 0
        elif character == "," and not depth:
            items.append(text[start:position])
            start = position + 1
    if depth:
        raise _unbalanced(text, "a '[' that is never closed")
    items.append(text[start:])
    for item in items:
        if not item:
            raise InvalidInputError(
                f"hostlist {_shown(text)} has an empty name between commas",
                hint="remove the extra comma",
            )
    return items


def _parsed_item(item: str, text: str) -> tuple[list[str], _Ranges]:
    """The literal parts of one item and the ranges of each of its ``[...]``."""
    pieces = _BRACKET_GROUP.split(item)
    return pieces[0::2], [_ranges(inside, text) for inside in pieces[1::2]]


def _names(literals: list[str], ranges: _Ranges) -> list[str]:
    choices = [
        [f"{value:0{width}d}" for first, last, width in group for value in range(first, last + 1)]
        for group in ranges
    ]
    names: list[str] = []
    for picked in itertools.product(*choices):
        parts = [literals[0]]
        for number, literal in zip(picked, literals[1:], strict=True):
            parts.extend((number, literal))
        names.append("".join(parts))
    return names


def _ranges(inside: str, text: str) -> list[tuple[int, int, int]]:
    """The ranges in one ``[...]``: (first, last, zero-padded width) each."""
    ranges: list[tuple[int, int, int]] = []
    for piece in inside.split(","):
        if not piece:
            raise InvalidInputError(
                f"hostlist {_shown(text)} has an empty range in [{_shown(inside)}]",
                hint="put a number or lo-hi between every pair of commas and inside every []",
            )
        low, dash, high = piece.partition("-")
        _checked_number(low, piece, text)
        if not dash:
            ranges.append((int(low), int(low), len(low)))
            continue
        _checked_number(high, piece, text)
        first, last = int(low), int(high)
        if first > last:
            raise InvalidInputError(
                f"hostlist {_shown(text)} has range {_shown(piece)} that runs backwards",
                hint=f"write the lower number first: [{high}-{low}]",
            )
        ranges.append((first, last, len(low)))
    return ranges


def _checked_number(digits: str, piece: str, text: str) -> str:
    if not _DIGITS.fullmatch(digits):
        raise InvalidInputError(
            f"hostlist {_shown(text)} has range {_shown(piece)}, which is not a number or lo-hi",
            hint=_RANGE_HINT,
        )
    return digits


def _shown(text: str) -> str:
    """An expression for a message: quoted, and cut when long (a line may be megabytes)."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}… ({len(text):,} characters)"


def _unbalanced(text: str, what: str) -> InvalidInputError:
    return InvalidInputError(
        f"hostlist {_shown(text)} has unbalanced brackets: {what}",
        hint="close every '[' with a ']', e.g. p5-[001-016]",
    )


def _too_many(text: str) -> InvalidInputError:
    return InvalidInputError(
        f"hostlist {_shown(text)} stands for more than {MAX_EXPANDED_NAMES} names",
        hint="check the range bounds for a typo",
    )


def _check_compressible(name: str) -> None:
    if not name or any(c.isspace() or c in HOSTLIST_SYNTAX_CHARACTERS for c in name):
        raise InvalidInputError(
            f"node name {name!r} cannot be written in a hostlist",
            hint="a name must be non-empty, without whitespace, commas or brackets",
        )


@dataclass
class _Run:
    """Consecutive numbers written with one zero-padding width (that of ``first``)."""

    first: str
    last: str

    @property
    def width(self) -> int:
        return len(self.first)

    def accepts(self, digits: str) -> bool:
        return int(digits) == int(self.last) + 1 and f"{int(digits):0{self.width}d}" == digits


def _numeric_runs(digit_strings: set[str]) -> list[_Run]:
    """Fold numbers into ranges; ``7`` and ``007`` differ and never share a range."""
    runs: list[_Run] = []
    open_runs: list[_Run] = []
    for digits in sorted(digit_strings, key=lambda text: (int(text), len(text))):
        value = int(digits)
        open_runs = [run for run in open_runs if int(run.last) >= value - 1]
        extendable = next((run for run in open_runs if run.accepts(digits)), None)
        if extendable is not None:
            extendable.last = digits
            continue
        run = _Run(digits, digits)
        runs.append(run)
        open_runs.append(run)
    return runs


def _render_group(prefix: str, runs: list[_Run], suffix: str) -> str:
    if len(runs) == 1 and runs[0].first == runs[0].last:
        return f"{prefix}{runs[0].first}{suffix}"
    ranges = ",".join(
        run.first if run.first == run.last else f"{run.first}-{run.last}" for run in runs
    )
    return f"{prefix}[{ranges}]{suffix}"
