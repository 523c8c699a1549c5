"""Synthetic clusters: regular trees of identical nodes generated from a shape.

A shape such as ``[2, 4, 16]`` reads broadest first: the last number is the nodes per lowest
domain, each other number the domains per parent (2 spines × 4 blocks × 16 nodes). The levels
default to ``topology.k8s.aws/network-node-layer-1`` … ``-K`` (K = len(shape) - 1, at most 4)
then ``kubernetes.io/hostname``; give explicit levels for anything else.

Naming of generated things:

* a domain at level ``d`` (1 = broadest) is ``l{d}-`` followed by the 1-based positions of its
  ancestors and itself, zero-padded to two digits: ``l1-02`` is the second spine, ``l2-02-03``
  the third block under it. Top positions continue across pools, so every value is unique;
* nodes are ``{name_prefix}{number}``, numbered from 1 with at least four digits (``p5-0001``),
  continuing across pools that share a prefix; ``kubernetes.io/hostname`` is the node name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from math import prod

from topoq.discovery.instance_types import find_instance_type, known_instance_types
from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import MAX_CLUSTER_NODES
from topoq.domain.node import HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, NodeName, NodeSpec, Taint
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, MAX_LEVELS, TopologySpec

DEFAULT_NAME_PREFIX = "node-"


@dataclass(frozen=True)
class NodePool:
    """Identical nodes laid out by ``shape``; ``where`` names the pool in error messages."""

    shape: tuple[int, ...]
    allocatable: Resources
    instance_type: str | None = None
    name_prefix: str = DEFAULT_NAME_PREFIX
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    where: str = "shape"


@dataclass
class PoolNumbering:
    """Where the next pool starts counting, so generated names stay unique across pools."""

    next_top: int = 1
    next_node: dict[str, int] = field(default_factory=dict)


def generate_cluster(
    shape: Sequence[int],
    *,
    instance_type: str | None = None,
    resources: Resources | None = None,
    levels: Sequence[str] | None = None,
    name_prefix: str = DEFAULT_NAME_PREFIX,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    name: str = "generated",
) -> tuple[list[NodeSpec], TopologySpec]:
    """A regular tree of identical nodes; see the module docstring for shapes and names.

    ``resources`` wins over the instance type's capacity when both are given; the instance type
    then only labels the nodes.
    """
    checked = checked_shape(shape, where="shape")
    checked_node_count([("shape", checked)])
    allocatable = pool_allocatable(instance_type, resources, where="")
    chosen = tuple(levels) if levels is not None else default_levels(len(checked), where="shape")
    topology = TopologySpec(name, chosen)
    pool = NodePool(checked, allocatable, instance_type, name_prefix, labels or {}, tuple(taints))
    return pool_nodes(pool, topology, PoolNumbering()), topology


def checked_node_count(shapes: Sequence[tuple[str, Sequence[int]]]) -> None:
    """The pools of these ``(where, shape)`` pairs have at most ``MAX_CLUSTER_NODES`` nodes
    together; counted before a node is generated."""
    total = 0
    for where, shape in shapes:
        total += math.prod(shape)
        if total > MAX_CLUSTER_NODES:
            raise InvalidInputError(
                f"the shape makes the cluster {total:,} nodes: more than "
                f"{MAX_CLUSTER_NODES:,} nodes",
                where=where,
                hint=f"a cluster has at most {MAX_CLUSTER_NODES:,} nodes",
            )


def checked_shape(shape: Sequence[object], *, where: str) -> tuple[int, ...]:
    """``shape`` as positive integers; errors name ``where[i]``."""
    if not shape or len(shape) > MAX_LEVELS + 1:
        raise InvalidInputError(
            f"the shape has {len(shape)} numbers",
            where=where,
            hint=f"give 1 to {MAX_LEVELS + 1} numbers, e.g. [2, 4, 16]",
        )
    checked: list[int] = []
    for index, count in enumerate(shape):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidInputError(
                f"expected a whole number of at least 1, got {count!r}",
                where=f"{where}[{index}]",
                hint="the last number counts nodes per lowest domain, the others domains",
            )
        checked.append(count)
    return tuple(checked)


def default_levels(shape_length: int, *, where: str) -> tuple[str, ...]:
    """The AWS network layers above the nodes, then the hostname."""
    above = shape_length - 1
    if above > len(AWS_NETWORK_LAYER_LABELS):
        raise InvalidInputError(
            f"the shape has {shape_length} numbers but the default levels cover at most "
            f"{len(AWS_NETWORK_LAYER_LABELS) + 1}",
            where=where,
            hint="give `levels` with one node label per number above the nodes",
        )
    return (*AWS_NETWORK_LAYER_LABELS[:above], HOSTNAME_LABEL)


def pool_allocatable(
    instance_type: str | None, resources: Resources | None, *, where: str
) -> Resources:
    """``resources`` if given, else the capacity of ``instance_type``; errors name ``where``."""
    if resources is not None:
        return resources
    if instance_type is None:
        raise InvalidInputError(
            "gives neither an instance type nor resources",
            where=where or None,
            hint="add instance_type (e.g. p5.48xlarge) or resources/allocatable",
        )
    known = find_instance_type(instance_type)
    if known is None:
        raise InvalidInputError(
            f"unknown instance type {instance_type!r}",
            where=f"{where}.instance_type" if where else "instance_type",
            hint=f"known types: {', '.join(known_instance_types())}; or give the resources",
        )
    return known.allocatable()


def pool_nodes(pool: NodePool, topology: TopologySpec, numbering: PoolNumbering) -> list[NodeSpec]:
    """The nodes of ``pool``, labelled for ``topology``; advances ``numbering``."""
    domain_levels = _domain_levels(pool, topology)
    *domain_counts, per_leaf = pool.shape
    first_top = numbering.next_top
    largest = [first_top + count - 1 if i == 0 else count for i, count in enumerate(domain_counts)]
    widths = [max(2, len(str(position))) for position in largest]
    number = numbering.next_node.get(pool.name_prefix, 1)
    node_width = max(4, len(str(number + prod(pool.shape) - 1)))
    base = dict(pool.labels)
    if pool.instance_type:
        base[INSTANCE_TYPE_LABEL] = pool.instance_type
    nodes: list[NodeSpec] = []
    for path in product(*(range(count) for count in domain_counts)):
        positions = [first_top + path[0], *(index + 1 for index in path[1:])] if path else []
        parts = [f"{position:0{width}d}" for position, width in zip(positions, widths, strict=True)]
        leaf = base | {
            level: f"l{depth}-" + "-".join(parts[:depth])
            for depth, level in enumerate(domain_levels, start=1)
        }
        for _ in range(per_leaf):
            node_name = f"{pool.name_prefix}{number:0{node_width}d}"
            labels = leaf | {HOSTNAME_LABEL: node_name}
            nodes.append(NodeSpec(NodeName(node_name), labels, pool.allocatable, pool.taints))
            number += 1
    numbering.next_top += domain_counts[0] if domain_counts else 0
    numbering.next_node[pool.name_prefix] = number
    return nodes


def _domain_levels(pool: NodePool, topology: TopologySpec) -> tuple[str, ...]:
    """The levels the shape's domain numbers fill: every level above the nodes."""
    domain = topology.levels[:-1] if topology.leaves_are_nodes else topology.levels
    above = len(pool.shape) - 1
    if len(domain) != above:
        raise InvalidInputError(
            f"a shape of {len(pool.shape)} numbers needs {above} levels above the nodes, "
            f"but the levels {list(topology.levels)} have {len(domain)}",
            where=pool.where,
            hint="give one number per level above the nodes, plus the nodes per lowest domain",
        )
    if clashing := sorted((set(domain) | {HOSTNAME_LABEL}) & set(pool.labels)):
        raise InvalidInputError(
            f"labels set {clashing}, which the shape generates",
            where=pool.where,
            hint="remove those labels; the generator names the domains and hosts",
        )
    return domain
