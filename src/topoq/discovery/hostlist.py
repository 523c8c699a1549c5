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

_DIGITS = re.compile(r"[0-9]+")
_BRACKET_GROUP = re.compile(r"\[([^\[\]]*)\]")
_LAST_NUMBER = re.compile(r"^(?P<prefix>.*?)(?P<digits>[0-9]+)(?P<suffix>[^0-9]*)$")
_RANGE_HINT = "write ranges as lo-hi with decimal numbers, e.g. p5-[001-016,020]"


def expand_hostlist(expr: str) -> list[str]:
    """The names an expression stands for, in expression order; ``""`` stands for no names."""
    text = expr.strip()
    if not text:
        return []
    if any(character.isspace() for character in text):
        raise InvalidInputError(
            f"hostlist {expr!r} contains whitespace",
            hint="separate names with commas only, e.g. a1,b[1-3],c",
        )
    names: list[str] = []
    for item in _top_level_items(text):
        names.extend(_expand_item(item, text))
        if len(names) > MAX_EXPANDED_NAMES:
            raise _too_many(text)
    return names


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
                    f"hostlist {text!r} has a bracket inside brackets at position {position + 1}",
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
                f"hostlist {text!r} has an empty name between commas",
                hint="remove the extra comma",
            )
    return items


def _expand_item(item: str, text: str) -> list[str]:
    pieces = _BRACKET_GROUP.split(item)
    literals = pieces[0::2]
    choices = [_expand_ranges(inside, text) for inside in pieces[1::2]]
    total = 1
    for options in choices:
        total *= len(options)
    if total > MAX_EXPANDED_NAMES:
        raise _too_many(text)
    names: list[str] = []
    for picked in itertools.product(*choices):
        parts = [literals[0]]
        for number, literal in zip(picked, literals[1:], strict=True):
            parts.extend((number, literal))
        names.append("".join(parts))
    return names


def _expand_ranges(inside: str, text: str) -> list[str]:
    numbers: list[str] = []
    for piece in inside.split(","):
        if not piece:
            raise InvalidInputError(
                f"hostlist {text!r} has an empty range in [{inside}]",
                hint="put a number or lo-hi between every pair of commas and inside every []",
            )
        low, dash, high = piece.partition("-")
        if not dash:
            numbers.append(_checked_number(low, piece, text))
            continue
        _checked_number(low, piece, text)
        _checked_number(high, piece, text)
        first, last = int(low), int(high)
        if first > last:
            raise InvalidInputError(
                f"hostlist {text!r} has range {piece!r} that runs backwards",
                hint=f"write the lower number first: [{high}-{low}]",
            )
        if last - first >= MAX_EXPANDED_NAMES:
            raise _too_many(text)
        numbers.extend(f"{value:0{len(low)}d}" for value in range(first, last + 1))
    return numbers


def _checked_number(digits: str, piece: str, text: str) -> str:
    if not _DIGITS.fullmatch(digits):
        raise InvalidInputError(
            f"hostlist {text!r} has range {piece!r}, which is not a number or lo-hi",
            hint=_RANGE_HINT,
        )
    return digits


def _unbalanced(text: str, what: str) -> InvalidInputError:
    return InvalidInputError(
        f"hostlist {text!r} has unbalanced brackets: {what}",
        hint="close every '[' with a ']', e.g. p5-[001-016]",
    )


def _too_many(text: str) -> InvalidInputError:
    return InvalidInputError(
        f"hostlist {text!r} stands for more than {MAX_EXPANDED_NAMES} names",
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
