"""Import a cluster from ``aws ec2 describe-instance-topology`` output.

Each instance becomes a node named by its ``InstanceId``. ``NetworkNodes`` (top layer first) map
to ``topology.k8s.aws/network-node-layer-1`` … ``-4``; ``AvailabilityZone``, ``ZoneId``,
``CapacityBlockId`` and ``GroupName`` become node labels too. The topology's levels are the
network layers every placed instance shares, then ``topology.k8s.aws/ultraserver-id`` when every
placed instance belongs to a capacity block, then ``kubernetes.io/hostname``. Instances without
``NetworkNodes`` stay nodes but sit outside the topology; the import says so in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from topoq.discovery.documents import Fields, documents_in_text, read_text_file
from topoq.discovery.instance_types import find_instance_type, known_instance_types
from topoq.domain.errors import InvalidInputError, TopologyError
from topoq.domain.limits import MAX_CLUSTER_NODES
from topoq.domain.node import HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, NodeName, NodeSpec
from topoq.domain.resources import Resources
from topoq.domain.topology import AWS_ULTRASERVER_LABEL, TopologySpec

TOPOLOGY_NAME = "aws"
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
PLACEMENT_GROUP_LABEL = "topoq.io/placement-group"
_LISTED_IDS = 5  # warnings name at most this many instances


def network_layer_label(layer: int) -> str:
    """The node label of network layer ``layer`` (1 = the top layer)."""
    return f"topology.k8s.aws/network-node-layer-{layer}"


@dataclass(frozen=True)
class ImportedCluster:
    """Nodes and topology read from an outside format, plus what the reader had to gloss over."""

    nodes: tuple[NodeSpec, ...]
    topology: TopologySpec
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Instance:
    instance_id: str
    instance_type: str
    network_nodes: tuple[str, ...]
    capacity_block: str | None
    labels: Mapping[str, str]
    where: str


def load_instance_topology(
    paths: Sequence[Path | str], *, default_resources: Resources | None = None
) -> ImportedCluster:
    """Read one or more files of ``describe-instance-topology`` output (pages in any layout)."""
    pages: list[tuple[str, object]] = []
    for path in paths:
        source = str(path)
        text = read_text_file(path)
        pages.extend(_labelled_pages(documents_in_text(text, source=source), source))
    return _import_pages(pages, default_resources)


def cluster_from_instance_topology(
    documents: Sequence[object] | Mapping[str, object],
    *,
    source: str,
    default_resources: Resources | None = None,
) -> ImportedCluster:
    """Nodes and topology from parsed pages: one page, a list of pages, or lists of pages.

    ``default_resources`` is the allocatable of instances whose type topoq does not know; without
    it an unknown type is an error.
    """
    page_list: Sequence[object] = [documents] if isinstance(documents, Mapping) else documents
    return _import_pages(_labelled_pages(page_list, source), default_resources)


def _labelled_pages(documents: Sequence[object], source: str) -> list[tuple[str, object]]:
    pages: list[object] = []
    for document in documents:
        pages.extend(document if isinstance(document, list) else [document])
    if len(pages) == 1:
        return [(source, pages[0])]
    return [(f"{source} page {number}", page) for number, page in enumerate(pages, start=1)]


def _import_pages(
    pages: Sequence[tuple[str, object]], default_resources: Resources | None
) -> ImportedCluster:
    instances = _read_instances(pages)
    warnings: list[str] = []
    placed = [instance for instance in instances if instance.network_nodes]
    depth = _common_depth(placed, warnings)
    _check_nesting(placed, depth)
    levels = [network_layer_label(layer) for layer in range(1, depth + 1)]
    if _ultraserver_level_fits(placed, depth, warnings):
        levels.append(AWS_ULTRASERVER_LABEL)
    levels.append(HOSTNAME_LABEL)
    _warn_outside_topology(instances, warnings)
    nodes = tuple(_node(instance, default_resources) for instance in instances)
    return ImportedCluster(nodes, TopologySpec(TOPOLOGY_NAME, tuple(levels)), tuple(warnings))


def _read_instances(pages: Sequence[tuple[str, object]]) -> list[_Instance]:
    instances: list[_Instance] = []
    seen: dict[str, str] = {}
    for page_source, page in pages:
        try:
            page_instances = _page_instances(page)
        except InvalidInputError as error:
            raise error.located(page_source) from None
        for instance in page_instances:
            where = f"{page_source}: {instance.where}"
            if instance.instance_id in seen:
                raise TopologyError(
                    f"instance {instance.instance_id!r} is listed twice",
                    where=where,
                    hint=f"it is also at {seen[instance.instance_id]}; pass each page once",
                )
            seen[instance.instance_id] = where
            instances.append(replace(instance, where=where))
            if len(instances) > MAX_CLUSTER_NODES:
                raise InvalidInputError(
                    f"more than {MAX_CLUSTER_NODES:,} nodes",
                    where=where,
                    hint=f"a cluster has at most {MAX_CLUSTER_NODES:,} nodes",
                )
    if not instances:
        raise InvalidInputError(
            "the output lists no instances",
            where=pages[0][0] if pages else None,
            hint="run aws ec2 describe-instance-topology in the region of the cluster",
        )
    return instances


def _page_instances(page: object) -> list[_Instance]:
    fields = Fields(page, "")
    if "Instances" not in fields.data:
        raise InvalidInputError(
            "has no 'Instances'", hint="give the JSON printed by aws ec2 describe-instance-topology"
        )
    return [_instance(record) for record in fields.records("Instances")]


def _instance(record: Fields) -> _Instance:
    instance_id = record.text("InstanceId")
    instance_type = record.text("InstanceType").strip()
    network_nodes: list[str] = []
    for index, value in enumerate(record.items("NetworkNodes")):
        if not isinstance(value, str) or not value:
            raise InvalidInputError(
                f"expected a network node id, got {value!r}",
                where=f"{record.path('NetworkNodes')}[{index}]",
            )
        network_nodes.append(value)
    labels = {HOSTNAME_LABEL: instance_id, INSTANCE_TYPE_LABEL: instance_type}
    for field, label in (
        ("AvailabilityZone", ZONE_LABEL),
        ("ZoneId", ZONE_ID_LABEL),
        ("CapacityBlockId", AWS_ULTRASERVER_LABEL),
        ("GroupName", PLACEMENT_GROUP_LABEL),
    ):
        value = record.optional_text(field)
        if value:
            labels[label] = value
    for layer, network_node in enumerate(network_nodes, start=1):
        labels[network_layer_label(layer)] = network_node
    capacity_block = labels.get(AWS_ULTRASERVER_LABEL)
    return _Instance(
        instance_id, instance_type, tuple(network_nodes), capacity_block, labels, record.where
    )


def _common_depth(placed: Sequence[_Instance], warnings: list[str]) -> int:
    if not placed:
        warnings.append(
            "no instance reports network nodes; the topology has the hosts only "
            "(instances that are stopped or of an unsupported type report none)"
        )
        return 0
    depths = sorted({len(instance.network_nodes) for instance in placed})
    if len(depths) > 1:
        counts = ", ".join(
            f"{sum(len(i.network_nodes) == depth for i in placed)} with {depth}" for depth in depths
        )
        warnings.append(
            f"instances report different numbers of network layers ({counts}); "
            f"using the {depths[0]} layers they all have"
        )
    return depths[0]


def _check_nesting(placed: Sequence[_Instance], depth: int) -> None:
    """Each network node must sit under one parent, or the layers do not form a tree."""
    parents: dict[tuple[int, str], tuple[str, str]] = {}
    for instance in placed:
        for layer in range(1, depth):
            child, parent = instance.network_nodes[layer], instance.network_nodes[layer - 1]
            known = parents.setdefault((layer, child), (parent, instance.instance_id))
            if known[0] != parent:
                raise TopologyError(
                    f"network node {child!r} sits under {parent!r} here "
                    f"but under {known[0]!r} for instance {known[1]!r}",
                    where=f"{instance.where}.NetworkNodes[{layer}]",
                    hint="the pages may come from different times; fetch them again together",
                )


def _ultraserver_level_fits(placed: Sequence[_Instance], depth: int, warnings: list[str]) -> bool:
    with_block = [instance for instance in placed if instance.capacity_block]
    if not with_block:
        return False
    if len(with_block) < len(placed):
        warnings.append(
            f"{len(with_block)} of {len(placed)} placed instances have a CapacityBlockId; "
            f"the {AWS_ULTRASERVER_LABEL} level is left out of the topology"
        )
        return False
    if depth == 0:
        return True
    parents: dict[str, str] = {}
    for instance in with_block:
        block, bottom = instance.capacity_block or "", instance.network_nodes[depth - 1]
        if parents.setdefault(block, bottom) != bottom:
            warnings.append(
                f"capacity block {block!r} spans several layer-{depth} network nodes; "
                f"the {AWS_ULTRASERVER_LABEL} level is left out of the topology"
            )
            return False
    return True


def _warn_outside_topology(instances: Sequence[_Instance], warnings: list[str]) -> None:
    outside = [instance.instance_id for instance in instances if not instance.network_nodes]
    if not outside or len(outside) == len(instances):
        return
    listed = ", ".join(outside[:_LISTED_IDS]) + (" …" if len(outside) > _LISTED_IDS else "")
    warnings.append(
        f"{len(outside)} instance(s) report no network nodes ({listed}); they are kept as nodes "
        "outside the topology, so no placement uses them"
    )


def _node(instance: _Instance, default_resources: Resources | None) -> NodeSpec:
    known = find_instance_type(instance.instance_type)
    if known is not None:
        allocatable = known.allocatable()
    elif default_resources is not None:
        allocatable = default_resources
    else:
        raise InvalidInputError(
            f"instance {instance.instance_id!r} has type {instance.instance_type!r}, "
            "which topoq does not know",
            where=f"{instance.where}.InstanceType",
            hint=f"known types: {', '.join(known_instance_types())}; "
            "or give default resources for unknown types",
        )
    return NodeSpec(NodeName(instance.instance_id), instance.labels, allocatable)
