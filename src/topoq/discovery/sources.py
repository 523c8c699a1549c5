"""One entry point for every cluster description topoq reads, whatever its format.

``load_cluster`` recognises a Kubernetes NodeList, the output of ``aws ec2
describe-instance-topology``, a Slurm ``topology.conf`` and topoq's own cluster file by their
content; a Kueue ``Topology`` can override the levels and a PodList adds capacity in use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from topoq.discovery.clusterfile import cluster_from_document, load_example_cluster
from topoq.discovery.documents import (
    documents_in_text,
    parse_document,
    read_document,
    read_text_file,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, AWS_ULTRASERVER_LABEL, TopologySpec

DEFAULT_SLURM_INSTANCE_TYPE = "p5.48xlarge"
_SLURM_LINE = re.compile(r"^\s*(switchname|blockname|blocksizes)\s*=", re.IGNORECASE | re.MULTILINE)
_NODE_KINDS = frozenset({"NodeList", "Node", "List"})


class ClusterFormat(StrEnum):
    TOPOQ = "topoq cluster file"
    KUBERNETES = "Kubernetes NodeList"
    AWS = "aws ec2 describe-instance-topology"
    SLURM = "Slurm topology.conf"


@dataclass(frozen=True)
class LoadedCluster:
    name: str
    format: ClusterFormat
    nodes: tuple[NodeSpec, ...]
    topology: TopologySpec
    used: Mapping[str, Resources] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


def load_cluster(
    path: Path | str | None,
    *,
    topology: Path | str | None = None,
    pods: Path | str | None = None,
    slurm_instance_type: str | None = None,
) -> LoadedCluster:
    """Read a cluster (the shipped example when ``path`` is None), then apply the optional Kueue
    Topology (levels) and PodList (capacity in use)."""
    cluster = _read_cluster(path, slurm_instance_type) if path is not None else _example()
    if topology is None and cluster.format is ClusterFormat.KUBERNETES:
        cluster = replace(cluster, warnings=(*cluster.warnings, _guessed_levels_warning(cluster)))
    if topology is not None:
        from topoq.discovery.kubernetes import topology_from_kueue

        spec = topology_from_kueue(read_document(topology), source=str(topology))
        cluster = replace(cluster, topology=spec)
    if pods is not None:
        from topoq.discovery.kubernetes import usage_from_podlist

        usage = dict(cluster.used)
        for node, resources in usage_from_podlist(read_document(pods), source=str(pods)).items():
            usage[node] = usage.get(node, Resources()) + resources
        cluster = replace(cluster, used=usage)
    return cluster


def _example() -> LoadedCluster:
    example = load_example_cluster()
    return LoadedCluster(
        example.name, ClusterFormat.TOPOQ, example.nodes, example.topology, example.used
    )


def _read_cluster(path: Path | str, slurm_instance_type: str | None) -> LoadedCluster:
    source = str(path)
    text = read_text_file(path)
    name = Path(path).stem
    if _SLURM_LINE.search(text):
        return _slurm(text, source, name, slurm_instance_type)
    stripped = text.lstrip()
    documents = (
        documents_in_text(text, source=source)
        if stripped.startswith("{")
        else [parse_document(text, source=source)]
    )
    first = documents[0] if documents else None
    if isinstance(first, list) or (isinstance(first, Mapping) and "Instances" in first):
        from topoq.discovery.aws import cluster_from_instance_topology

        imported = cluster_from_instance_topology(documents, source=source)
        return LoadedCluster(
            name, ClusterFormat.AWS, imported.nodes, imported.topology, warnings=imported.warnings
        )
    kind = first.get("kind") if isinstance(first, Mapping) else None
    kind = kind if isinstance(kind, str) else None
    if kind in _NODE_KINDS:
        from topoq.discovery.kubernetes import nodes_from_nodelist

        nodes = nodes_from_nodelist(first, source=source)
        spec = _levels_from_labels(nodes)
        return LoadedCluster(name, ClusterFormat.KUBERNETES, tuple(nodes), spec)
    if kind == "Cluster":
        cluster = cluster_from_document(first, source=source, default_name=name)
        return LoadedCluster(
            cluster.name, ClusterFormat.TOPOQ, cluster.nodes, cluster.topology, cluster.used
        )
    raise InvalidInputError(
        f"cannot tell what kind of cluster description this is (kind: {kind!r})",
        where=source,
        hint="give a Kubernetes NodeList, the JSON of 'aws ec2 describe-instance-topology', a "
        "Slurm topology.conf, or a topoq cluster file (kind: Cluster)",
    )


def _slurm(text: str, source: str, name: str, instance_type: str | None) -> LoadedCluster:
    from topoq.discovery.instance_types import find_instance_type, known_instance_types
    from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf

    chosen = instance_type or DEFAULT_SLURM_INSTANCE_TYPE
    instance = find_instance_type(chosen)
    if instance is None:
        raise InvalidInputError(
            f"unknown instance type {chosen!r} for the Slurm nodes",
            where=source,
            hint="use one of: " + ", ".join(known_instance_types()),
        )
    nodes, spec = cluster_from_slurm(
        parse_topology_conf(text, source=source), node_resources=instance.allocatable()
    )
    warnings = (
        ()
        if instance_type
        else (
            f"topology.conf has no node capacity: each node is taken to be a {chosen} "
            "(choose another with --instance-type)",
        )
    )
    return LoadedCluster(name, ClusterFormat.SLURM, tuple(nodes), spec, warnings=warnings)


def _levels_from_labels(nodes: list[NodeSpec]) -> TopologySpec:
    """Without a Kueue Topology: the AWS network layers (and UltraServer) the nodes carry."""
    present = {label for node in nodes for label in node.labels}
    levels = [label for label in AWS_NETWORK_LAYER_LABELS if label in present]
    if AWS_ULTRASERVER_LABEL in present:
        levels.append(AWS_ULTRASERVER_LABEL)
    levels.append(HOSTNAME_LABEL)
    return TopologySpec("from-node-labels", tuple(levels))


def _guessed_levels_warning(cluster: LoadedCluster) -> str:
    return (
        "no Kueue Topology given (--topology): levels taken from the nodes' labels: "
        + ", ".join(cluster.topology.levels)
    )
