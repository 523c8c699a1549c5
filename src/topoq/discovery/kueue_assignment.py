"""Kueue's topology assignment of a pod set (``status.admission.podSetAssignments[]
.topologyAssignment``) in both of its forms, read and written (pure):

- v1beta1: ``levels`` and ``domains: [{values: [one per level], count: pods}]``;
- v1beta2: ``levels`` and ``slices``, each of ``domainCount`` domains whose values per level
  are ``universal`` (the same for all) or ``individual`` (``prefix`` + each of ``roots`` +
  ``suffix``), with ``podCounts`` ``universal`` or ``individual``.

Both read as the same list of ``Domain`` (values per level, pods); writing v1beta2 groups
runs of domains into slices and factors out a common prefix and suffix per level, as Kueue
does to keep large assignments small.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topoq.domain.errors import InvalidInputError

MAX_AFFIX = 63
MAX_DOMAINS = 100_000
"""Domains of one assignment at most (Kueue's own limit on a slice's roots and counts)."""


@dataclass(frozen=True)
class Domain:
    values: tuple[str, ...]
    """The domain's value at each level of the assignment, in its order."""
    pods: int


@dataclass(frozen=True)
class TopologyAssignment:
    levels: tuple[str, ...]
    domains: tuple[Domain, ...]


def read_assignment(
    document: Mapping[str, Any], *, where: str = "topologyAssignment"
) -> TopologyAssignment:
    """Either form (a document with ``slices`` is v1beta2's)."""
    levels = tuple(str(level) for level in document.get("levels") or ())
    if not levels:
        raise InvalidInputError("no levels", where=where, hint="give the assignment's levels")
    if "slices" in document:
        domains: list[Domain] = []
        for i, record in enumerate(document["slices"] or ()):
            room = MAX_DOMAINS - len(domains)
            domains += _slice(record, levels, f"{where}.slices[{i}]", room)
    else:
        if len(document.get("domains") or ()) > MAX_DOMAINS:
            raise InvalidInputError(
                f"more than {MAX_DOMAINS:,} domains in the assignment", where=f"{where}.domains"
            )
        domains = [
            _domain(record, levels, f"{where}.domains[{i}]")
            for i, record in enumerate(document.get("domains") or ())
        ]
    return TopologyAssignment(levels, tuple(domains))


def _domain(record: Mapping[str, Any], levels: Sequence[str], where: str) -> Domain:
    values = tuple(str(v) for v in record.get("values") or ())
    if len(values) != len(levels):
        raise InvalidInputError(
            f"{len(values)} values for {len(levels)} levels",
            where=where,
            hint="one value per level",
        )
    return Domain(values, _count(record.get("count"), f"{where}.count"))


def _slice(record: Mapping[str, Any], levels: Sequence[str], where: str, room: int) -> list[Domain]:
    count = _count(record.get("domainCount"), f"{where}.domainCount")
    if count > room:
        raise InvalidInputError(
            f"more than {MAX_DOMAINS:,} domains in the assignment",
            where=f"{where}.domainCount",
            hint="an assignment has at most as many domains as Kueue allows",
        )
    per_level = list(record.get("valuesPerLevel") or ())
    if len(per_level) != len(levels):
        raise InvalidInputError(
            f"{len(per_level)} valuesPerLevel for {len(levels)} levels", where=where
        )
    columns = [_values(v, count, f"{where}.valuesPerLevel[{i}]") for i, v in enumerate(per_level)]
    pods = record.get("podCounts") or {}
    if "universal" in pods:
        counts = [_count(pods["universal"], f"{where}.podCounts.universal")] * count
    else:
        counts = [_count(c, f"{where}.podCounts.individual") for c in pods.get("individual") or ()]
        if len(counts) != count:
            raise InvalidInputError(
                f"{len(counts)} pod counts for {count} domains", where=f"{where}.podCounts"
            )
    return [Domain(tuple(column[i] for column in columns), counts[i]) for i in range(count)]


def _values(record: Mapping[str, Any], count: int, where: str) -> list[str]:
    if "universal" in record:
        return [str(record["universal"])] * count
    individual = record.get("individual") or {}
    roots = [str(root) for root in individual.get("roots") or ()]
    if len(roots) != count:
        raise InvalidInputError(f"{len(roots)} roots for {count} domains", where=where)
    prefix, suffix = str(individual.get("prefix", "")), str(individual.get("suffix", ""))
    return [f"{prefix}{root}{suffix}" for root in roots]


def _count(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidInputError(f"{value!r} is not a count of at least 1", where=where)
    return value


def v1beta1_document(assignment: TopologyAssignment) -> dict[str, Any]:
    return {
        "levels": list(assignment.levels),
        "domains": [{"values": list(d.values), "count": d.pods} for d in assignment.domains],
    }


def v1beta2_document(assignment: TopologyAssignment) -> dict[str, Any]:
    """One slice per run of domains that share the values of every level above the lowest
    (as Kueue writes them: typically one slice per block), each level ``universal`` when all
    its values are equal, else ``individual`` with the longest common prefix and suffix."""
    slices: list[dict[str, Any]] = []
    run: list[Domain] = []
    for domain in assignment.domains:
        if run and run[-1].values[:-1] != domain.values[:-1]:
            slices.append(_slice_document(run))
            run = []
        run.append(domain)
    if run:
        slices.append(_slice_document(run))
    return {"levels": list(assignment.levels), "slices": slices}


def _common_prefix(values: Sequence[str]) -> str:
    """The longest start all of ``values`` share, leaving each at least one character, at
    most ``MAX_AFFIX`` long."""
    shortest = min(len(v) for v in values)
    length = 0
    while length < min(shortest - 1, MAX_AFFIX) and len({v[length] for v in values}) == 1:
        length += 1
    return values[0][:length]


def _slice_document(domains: Sequence[Domain]) -> dict[str, Any]:
    per_level: list[dict[str, Any]] = []
    for level in range(len(domains[0].values)):
        values = [d.values[level] for d in domains]
        if len(set(values)) == 1:
            per_level.append({"universal": values[0]})
            continue
        prefix = _common_prefix(values)
        rest = [v[len(prefix) :] for v in values]
        suffix = _common_prefix([r[::-1] for r in rest])[::-1]
        roots = [r[: len(r) - len(suffix)] if suffix else r for r in rest]
        individual: dict[str, Any] = {"roots": roots}
        if prefix:
            individual["prefix"] = prefix
        if suffix:
            individual["suffix"] = suffix
        per_level.append({"individual": individual})
    counts = [d.pods for d in domains]
    pods = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    return {"domainCount": len(domains), "valuesPerLevel": per_level, "podCounts": pods}
