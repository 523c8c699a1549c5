"""The lines of a topology.conf as ``Key=value`` records, keys checked against the plugin's set.

Keys are case-insensitive (as in Slurm) and stored under their canonical spelling. ``#`` starts
a comment. A misspelt key is an error, never ignored: a line with ``SwitchNme=`` would otherwise
vanish from the topology.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from topoq.discovery.hostlist import HOSTLIST_SYNTAX_CHARACTERS, expand_hostlist, hostlist_size
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.limits import MAX_CLUSTER_NODES

RECORD_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "SwitchName": ("SwitchName", "Switches", "Nodes", "LinkSpeed"),
        "BlockName": ("BlockName", "Nodes"),
        "BlockSizes": ("BlockSizes",),
    }
)
"""The key that starts a line → every key allowed on that line."""

MAX_LINE_CHARS = 64 * 1024
"""One line of a topology.conf (a hostlist keeps even a large leaf's Nodes= short)."""
MAX_NAMED_LINES = 20_000
"""SwitchName= or BlockName= lines in one file."""
MAX_NODES = MAX_CLUSTER_NODES
"""Nodes listed by all the lines of one file together."""

_UNSUPPORTED_RECORDS = {"ringname": "the ring plugin", "include": "Include files"}
_PAIR_HINT = "write Key=value with no spaces around '=', pairs separated by spaces"


@dataclass(frozen=True)
class ConfLine:
    """One non-empty line: ``kind`` is the key that starts it (SwitchName, BlockName, …)."""

    number: int
    kind: str
    values: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.values[self.kind]


class NamedLine(Protocol):
    """A switch or block: a name defined on a line of the file."""

    @property
    def name(self) -> str: ...

    @property
    def line(self) -> int: ...


def check_unique_names(entries: Iterable[NamedLine], *, kind: str, key: str, source: str) -> None:
    """Each switch (or block) name is defined once; the error names both lines."""
    first_line: dict[str, int] = {}
    for entry in entries:
        if entry.name in first_line:
            raise TopologyError(
                f"{kind} {entry.name} is defined on line {first_line[entry.name]} "
                f"and again on line {entry.line}",
                where=at(source, entry.line),
                hint=f"give every {kind} a unique {key}=, or merge the two lines",
            )
        first_line[entry.name] = entry.line


class NodeListLine(NamedLine, Protocol):
    """A leaf switch or block: a name on a line, with the nodes it lists."""

    @property
    def nodes(self) -> tuple[str, ...]: ...


def check_nodes_listed_once(entries: Iterable[NodeListLine], *, kind: str, source: str) -> None:
    """No node is listed by two leaf switches (or two blocks); the error names both lines."""
    owner: dict[str, NodeListLine] = {}
    for entry in entries:
        for node in entry.nodes:
            earlier = owner.get(node)
            if earlier is not None:
                raise TopologyError(
                    f"node {node} is in {kind} {earlier.name} (line {earlier.line}) "
                    f"and in {kind} {entry.name} (line {entry.line})",
                    where=at(source, entry.line),
                    hint=f"list each node in exactly one {kind}; remove {node} "
                    "from one of the Nodes= lists",
                )
            owner[node] = entry


def at(source: str, number: int) -> str:
    """The ``where`` of an error on line ``number``."""
    return f"{source}:{number}"


def parse_conf_lines(text: str, source: str) -> list[ConfLine]:
    lines: list[ConfLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if len(raw) > MAX_LINE_CHARS:
            raise TopologyError(
                f"the line is longer than {MAX_LINE_CHARS:,} characters ({len(raw):,})",
                where=at(source, number),
                hint="write the nodes as a hostlist (p5-[001-064]) or split the switch",
            )
        content = raw.split("#", 1)[0].strip()
        if content:
            lines.append(_parse_line(content, number, source))
            if len(lines) > MAX_NAMED_LINES:
                raise TopologyError(
                    f"more than {MAX_NAMED_LINES:,} switches or blocks",
                    where=at(source, number),
                    hint=f"a topology.conf has at most {MAX_NAMED_LINES:,} lines of switches "
                    "or blocks",
                )
    return lines


class NodeCount:
    """The nodes listed so far by the lines of one file, refused past ``MAX_NODES``."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.total = 0

    def expand(self, line: ConfLine, key: str) -> tuple[str, ...]:
        """The names of ``key`` (see ``expand_names``), counted before they are built."""
        try:
            self.total += hostlist_size(line.values[key])
        except InvalidInputError:
            return expand_names(line, key, self.source)  # reports the error on its line
        if self.total > MAX_NODES:
            raise TopologyError(
                f"more than {MAX_NODES:,} nodes",
                where=at(self.source, line.number),
                hint=f"a topology.conf lists at most {MAX_NODES:,} nodes; "
                "check the hostlist ranges for a typo",
            )
        return expand_names(line, key, self.source)


def expand_names(line: ConfLine, key: str, source: str) -> tuple[str, ...]:
    """The names of a hostlist-valued key; a name listed twice on the line is an error."""
    try:
        names = expand_hostlist(line.values[key])
    except InvalidInputError as error:
        raise TopologyError(
            f"{key}=: {error.message}", where=at(source, line.number), hint=error.hint
        ) from None
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise TopologyError(
                f"{key}= lists {name!r} twice",
                where=at(source, line.number),
                hint=f"list each name once in {key}=",
            )
        seen.add(name)
    return tuple(names)


def check_single_name(line: ConfLine, source: str) -> None:
    """SwitchName=/BlockName= name one thing: no hostlist syntax."""
    if HOSTLIST_SYNTAX_CHARACTERS & set(line.name):
        raise TopologyError(
            f"{line.kind}={line.name} is a hostlist, not one name",
            where=at(source, line.number),
            hint=f"write one {line.kind}= line per name; brackets and commas are not allowed here",
        )


def _parse_line(content: str, number: int, source: str) -> ConfLine:
    pairs = [_key_value(token, number, source) for token in content.split()]
    kind = _record_kind(pairs[0][0], number, source)
    allowed = {key.lower(): key for key in RECORD_KEYS[kind]}
    values: dict[str, str] = {}
    for key, value in pairs:
        canonical = allowed.get(key.lower())
        if canonical is None:
            raise _unknown_key(key, kind, number, source)
        if canonical in values:
            raise TopologyError(
                f"{canonical}= appears twice on one line",
                where=at(source, number),
                hint=f"give {canonical}= once; join the lists into one hostlist instead",
            )
        values[canonical] = value
    return ConfLine(number, kind, MappingProxyType(values))


def _key_value(token: str, number: int, source: str) -> tuple[str, str]:
    key, equals, value = token.partition("=")
    if not equals or not key:
        raise TopologyError(
            f"{token!r} is not a Key=value pair", where=at(source, number), hint=_PAIR_HINT
        )
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    if not value:
        raise TopologyError(
            f"{key}= has no value",
            where=at(source, number),
            hint=f"give {key}= a value or remove it; {_PAIR_HINT}",
        )
    return key, value


def _record_kind(first_key: str, number: int, source: str) -> str:
    kinds = {kind.lower(): kind for kind in RECORD_KEYS}
    kind = kinds.get(first_key.lower())
    if kind is not None:
        return kind
    starts = (
        "a line starts with SwitchName= (tree plugin), BlockName= or BlockSizes= (block plugin)"
    )
    unsupported = _UNSUPPORTED_RECORDS.get(first_key.lower())
    if unsupported is not None:
        raise TopologyError(
            f"{first_key}= is not supported",
            where=at(source, number),
            hint=f"topoq reads the tree and block plugins, not {unsupported}; {starts}",
        )
    every_key = {key.lower(): key for keys in RECORD_KEYS.values() for key in keys}
    if first_key.lower() in every_key:
        raise TopologyError(
            f"the line starts with {every_key[first_key.lower()]}=",
            where=at(source, number),
            hint=f"{starts}; move the name to the front",
        )
    raise TopologyError(
        f"unknown key {first_key!r}",
        where=at(source, number),
        hint=_did_you_mean(first_key, tuple(RECORD_KEYS)) + starts,
    )


def _unknown_key(key: str, kind: str, number: int, source: str) -> TopologyError:
    allowed = RECORD_KEYS[kind]
    takes = f"a {kind}= line takes " + ", ".join(f"{name}=" for name in allowed)
    other_kinds = [
        other for other, keys in RECORD_KEYS.items() if key.lower() in map(str.lower, keys)
    ]
    if other_kinds:
        return TopologyError(
            f"{key}= does not belong on a {kind}= line",
            where=at(source, number),
            hint=f"{takes}; {key}= belongs on a {other_kinds[0]}= line, and a file uses one plugin",
        )
    return TopologyError(
        f"unknown key {key!r} on a {kind}= line",
        where=at(source, number),
        hint=_did_you_mean(key, allowed) + takes,
    )


def _did_you_mean(key: str, candidates: tuple[str, ...]) -> str:
    lowered = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    return f"did you mean {lowered[close[0]]}=? " if close else ""
