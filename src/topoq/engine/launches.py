"""How an admitted job becomes a ``GangLaunch``: its allocation, its nodes' topology labels
and allocatable resources, each pod set's command and the variables the job asks for."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from topoq.core.tree import TopologyTree
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobSpec, JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.engine.ports import GangLaunch

Commands = Callable[[JobSpec], Mapping[str, tuple[str, ...]]]
Environment = Callable[[JobSpec], Mapping[str, str]]


def gang_launch(
    job: JobView, tree: TopologyTree, commands: Commands, environment: Environment | None
) -> GangLaunch:
    """What the executor needs to start every pod of the admitted ``job``; ``environment``
    adds the control plane's own variables to the job's."""
    if job.allocation is None:  # admitted jobs always carry one
        raise InvalidInputError(f"job {job.id} was admitted without an allocation")
    nodes = {name: node for name in job.allocation.nodes if (node := _node(tree, name)) is not None}
    labels = {
        name: {level: node.labels.get(level, "") for level in tree.spec.levels}
        for name, node in nodes.items()
    }
    return GangLaunch(
        job.spec,
        job.allocation,
        job.attempt,
        labels,
        commands=commands(job.spec),
        environment=pod_set_environment(job.spec)
        | (dict(environment(job.spec)) if environment else {}),
        node_allocatable={name: node.allocatable for name, node in nodes.items()},
    )


def pod_set_commands(spec: JobSpec) -> dict[str, tuple[str, ...]]:
    """Each pod set's command, as the job was submitted (none: the default workload)."""
    return {ps.name: ps.command for ps in spec.workload.pod_sets if ps.command}


def pod_set_environment(spec: JobSpec) -> dict[str, str]:
    """The variables the job's pod sets ask for, merged in pod-set order."""
    merged: dict[str, str] = {}
    for pod_set in spec.workload.pod_sets:
        merged.update(pod_set.environment)
    return merged


def _node(tree: TopologyTree, name: str) -> NodeSpec | None:
    index = tree.node_index.get(NodeName(name))
    return tree.nodes[index] if index is not None else None
