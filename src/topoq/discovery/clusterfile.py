"""topoq's own cluster file (YAML or JSON): generated node pools, explicit nodes, used capacity.

``generate`` (one pool) and ``pools`` (a list) take a mapping with ``shape``, ``instance_type``
or ``resources``, ``name_prefix``, ``labels`` and ``taints``, or the one-line form
``"2x4x16 p5.48xlarge"``; :mod:`topoq.discovery.synthetic` describes shapes and generated names.
``levels`` defaults to the AWS network layers the shape needs plus ``kubernetes.io/hostname``;
with explicit ``nodes`` only, to the AWS network layer labels the nodes carry plus the hostname.
Explicit nodes get ``kubernetes.io/hostname`` = their name unless their labels say otherwise.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Any

from topoq.discovery.documents import Fields, check_header, parse_document, read_document
from topoq.discovery.synthetic import (
    DEFAULT_NAME_PREFIX,
    NodePool,
    PoolNumbering,
    checked_node_count,
    checked_shape,
    default_levels,
    generate_cluster,
    pool_allocatable,
    pool_nodes,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.node import (
    HOSTNAME_LABEL,
    INSTANCE_TYPE_LABEL,
    NodeName,
    NodeSpec,
    Taint,
    TaintEffect,
)
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, TopologySpec

__all__ = [
    "API_VERSION",
    "KIND",
    "ClusterFile",
    "cluster_document",
    "cluster_from_document",
    "generate_cluster",
    "load_cluster_file",
    "load_example_cluster",
]

API_VERSION = "topoq.io/v1"
KIND = "Cluster"
EXAMPLE_CLUSTER_FILE = "example-cluster.yaml"
_TOP_LEVEL_KEYS = ("apiVersion", "kind", "metadata", "levels", "generate", "pools", "nodes", "used")
_POOL_KEYS = ("shape", "instance_type", "resources", "name_prefix", "labels", "taints")
_NODE_KEYS = ("name", "instance_type", "allocatable", "labels", "taints", "unschedulable", "ready")
_TAINT_KEYS = ("key", "value", "effect")
_SHAPE_TEXT = re.compile(r"^\d+(?:[x×]\d+)*$")
_POOL_TEXT_HINT = 'write it as "2x4x16 p5.48xlarge" or as a mapping with shape and instance_type'


@dataclass(frozen=True)
class ClusterFile:
    """A cluster read from a cluster file. ``used`` is capacity already taken, per node name."""

    name: str
    nodes: tuple[NodeSpec, ...]
    topology: TopologySpec
    used: Mapping[str, Resources] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "used", MappingProxyType(dict(self.used)))


def load_cluster_file(path: Path | str) -> ClusterFile:
    """Read a cluster file; the cluster is named by ``metadata.name`` or else the file name."""
    document = read_document(path)
    return cluster_from_document(document, source=str(path), default_name=Path(path).stem)


def load_example_cluster() -> ClusterFile:
    """The cluster that ships with topoq, used when no cluster is given."""
    text = (files("topoq") / "data" / EXAMPLE_CLUSTER_FILE).read_text(encoding="utf-8")
    source = f"topoq/data/{EXAMPLE_CLUSTER_FILE}"
    return cluster_from_document(parse_document(text, source=source), source=source)


def cluster_from_document(
    document: object, *, source: str, default_name: str = "cluster"
) -> ClusterFile:
    """A parsed cluster file; every error names ``source`` and the field path."""
    try:
        return _cluster(Fields(document, ""), default_name)
    except InvalidInputError as error:
        raise error.located(source) from None


def _cluster(fields: Fields, default_name: str) -> ClusterFile:
    _reject_unknown_keys(fields, _TOP_LEVEL_KEYS)
    check_header(fields, API_VERSION, KIND, what="a topoq cluster file")
    name = fields.mapping("metadata").text("name", default_name)
    pools = _read_pools(fields)
    records = fields.records("nodes")
    shapes = [(pool.where, pool.shape) for pool in pools]
    checked_node_count([*shapes, (fields.path("nodes"), (len(records),))])
    explicit = [_explicit_node(record) for record in records]
    if not pools and not explicit:
        raise InvalidInputError(
            "the cluster has no nodes", hint="add `generate`, `pools` or `nodes`"
        )
    topology = TopologySpec(name, _read_levels(fields, pools, explicit))
    numbering = PoolNumbering()
    groups = [(pool.where, pool_nodes(pool, topology, numbering)) for pool in pools]
    groups += [(f"nodes[{index}].name", [node]) for index, node in enumerate(explicit)]
    nodes = _unique_nodes(groups)
    return ClusterFile(name, tuple(nodes), topology, _read_used(fields, nodes))


def _reject_unknown_keys(fields: Fields, allowed: Sequence[str]) -> None:
    fields.reject_unknown_keys(allowed, listed=allowed)


def _read_pools(fields: Fields) -> list[NodePool]:
    pools = (
        [_pool(fields.raw("generate"), fields.path("generate"))] if fields.has("generate") else []
    )
    pools += [
        _pool(value, f"{fields.path('pools')}[{index}]")
        for index, value in enumerate(fields.items("pools"))
    ]
    return pools


def _pool(value: object, where: str) -> NodePool:
    if isinstance(value, str):
        return _pool_from_text(value, where)
    pool = Fields(value, where)
    _reject_unknown_keys(pool, _POOL_KEYS)
    raw_shape = pool.required("shape")
    shape_where = pool.path("shape")
    if isinstance(raw_shape, str):
        shape = _shape_from_text(raw_shape, where=shape_where)
    elif isinstance(raw_shape, list):
        shape = checked_shape(raw_shape, where=shape_where)
    else:
        raise InvalidInputError(
            f"expected a list of numbers, got {raw_shape!r}",
            where=shape_where,
            hint="e.g. [2, 4, 16]",
        )
    instance_type = pool.optional_text("instance_type")
    resources = _optional_resources(pool, "resources")
    return NodePool(
        shape,
        pool_allocatable(instance_type, resources, where=where),
        instance_type,
        pool.text("name_prefix", DEFAULT_NAME_PREFIX),
        pool.string_map("labels"),
        _taints(pool),
        shape_where,
    )


def _pool_from_text(text: str, where: str) -> NodePool:
    words = text.split()
    if len(words) != 2:
        raise InvalidInputError(f"cannot read {text!r}", where=where, hint=_POOL_TEXT_HINT)
    shape = _shape_from_text(words[0], where=where)
    return NodePool(shape, pool_allocatable(words[1], None, where=where), words[1], where=where)


def _shape_from_text(text: str, *, where: str) -> tuple[int, ...]:
    compact = text.replace(" ", "")
    if not _SHAPE_TEXT.match(compact):
        raise InvalidInputError(
            f"cannot read the shape {text!r}", where=where, hint=_POOL_TEXT_HINT
        )
    return checked_shape([int(count) for count in re.split("[x×]", compact)], where=where)


def _optional_resources(fields: Fields, key: str) -> Resources | None:
    if not fields.has(key):
        return None
    return Resources.parse(fields.mapping(key).data, where=fields.path(key))


def _taints(fields: Fields) -> tuple[Taint, ...]:
    taints: list[Taint] = []
    for record in fields.records("taints"):
        _reject_unknown_keys(record, _TAINT_KEYS)
        try:
            effect = TaintEffect(record.text("effect"))
        except ValueError:
            raise InvalidInputError(
                f"unknown taint effect {record.text('effect')!r}",
                where=record.path("effect"),
                hint=f"use one of {', '.join(TaintEffect)}",
            ) from None
        taints.append(Taint(record.text("key"), effect, record.text("value", "")))
    return tuple(taints)


def _explicit_node(record: Fields) -> NodeSpec:
    _reject_unknown_keys(record, _NODE_KEYS)
    name = record.text("name")
    instance_type = record.optional_text("instance_type")
    allocatable = pool_allocatable(
        instance_type, _optional_resources(record, "allocatable"), where=record.where
    )
    labels = {HOSTNAME_LABEL: name} | record.string_map("labels")
    if instance_type:
        labels.setdefault(INSTANCE_TYPE_LABEL, instance_type)
    return NodeSpec(
        NodeName(name),
        labels,
        allocatable,
        _taints(record),
        unschedulable=record.boolean("unschedulable"),
        ready=record.boolean("ready", default=True),
    )


def _read_levels(
    fields: Fields, pools: Sequence[NodePool], explicit: Sequence[NodeSpec]
) -> tuple[str, ...]:
    if fields.has("levels"):
        levels = fields.items("levels")
        for index, level in enumerate(levels):
            if not isinstance(level, str) or not level:
                raise InvalidInputError(
                    f"expected a node label, got {level!r}",
                    where=f"{fields.path('levels')}[{index}]",
                )
        return tuple(levels)
    if pools:
        lengths = sorted({len(pool.shape) for pool in pools})
        if len(lengths) > 1:
            raise InvalidInputError(
                f"the pools have shapes of {lengths} numbers",
                where=fields.path("levels"),
                hint="give `levels`, and shapes with one number per level above the nodes",
            )
        return default_levels(lengths[0], where=pools[0].where)
    present = [
        label
        for label in AWS_NETWORK_LAYER_LABELS
        if any(label in node.labels for node in explicit)
    ]
    return (*present, HOSTNAME_LABEL)


def _unique_nodes(groups: Sequence[tuple[str, list[NodeSpec]]]) -> list[NodeSpec]:
    seen: dict[str, str] = {}
    nodes: list[NodeSpec] = []
    for where, group in groups:
        for node in group:
            if node.name in seen:
                raise InvalidInputError(
                    f"node {node.name!r} is defined twice",
                    where=where,
                    hint=f"also at {seen[node.name]}; give pools distinct name_prefix values",
                )
            seen[node.name] = where
        nodes.extend(group)
    return nodes


def _read_used(fields: Fields, nodes: Sequence[NodeSpec]) -> dict[str, Resources]:
    by_name = {node.name: node for node in nodes}
    used_fields = fields.mapping("used")
    used: dict[str, Resources] = {}
    for key in used_fields.data:
        name, where = str(key), used_fields.path(str(key))
        node = by_name.get(NodeName(name))
        if node is None:
            close = difflib.get_close_matches(name, list(by_name), n=1)
            raise InvalidInputError(
                f"names node {name!r}, which the cluster does not have",
                where=where,
                hint=f"did you mean {close[0]!r}?" if close else "use a node name from the cluster",
            )
        amounts = Resources.parse(Fields(used_fields.data[key], where).data, where=where)
        if not amounts.fits_in(node.allocatable):
            over = [
                resource
                for resource in amounts
                if amounts[resource] > node.allocatable.amount(resource)
            ]
            raise InvalidInputError(
                f"uses more {', '.join(over)} than node {name!r} has",
                where=where,
                hint=f"the node has {node.allocatable.formatted()}",
            )
        used[name] = amounts
    return used


def cluster_document(
    nodes: Sequence[NodeSpec],
    topology: TopologySpec,
    name: str,
    *,
    used: Mapping[str, Resources] | None = None,
) -> dict[str, Any]:
    """A cluster file listing ``nodes`` explicitly; :func:`cluster_from_document` reads it back."""
    document: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "levels": list(topology.levels),
        "nodes": [_node_document(node) for node in nodes],
    }
    if used:
        document["used"] = {node: dict(amounts.formatted()) for node, amounts in used.items()}
    return document


def _node_document(node: NodeSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": str(node.name),
        "allocatable": node.allocatable.formatted(),
        "labels": dict(node.labels),
    }
    if node.taints:
        entry["taints"] = [
            {"key": taint.key, "value": taint.value, "effect": str(taint.effect)}
            for taint in node.taints
        ]
    if node.unschedulable:
        entry["unschedulable"] = True
    if not node.ready:
        entry["ready"] = False
    return entry
