"""Where each pod of a placed gang runs and the environment a distributed launcher expects.

Ranks are global and contiguous in the placement's order: pod sets in the workload's order,
each pod set's assignments by ``first_rank``. A node's pods get ``LOCAL_RANK`` 0, 1, … in rank
order, and nodes get ``NODE_RANK`` in the order their first pod appears. When a placement leaf
pools several nodes (``DomainAssignment.node`` is ``None``), the leaf's own label value stands
in for the node's name.

Topology labels become variables by upper-casing the label and replacing every character
other than A–Z and 0–9 with ``_``, after the prefix ``TOPOQ_TOPOLOGY_``:

- ``kubernetes.io/hostname`` → ``TOPOQ_TOPOLOGY_KUBERNETES_IO_HOSTNAME``
- ``topology.k8s.aws/network-node-layer-1`` →
  ``TOPOQ_TOPOLOGY_TOPOLOGY_K8S_AWS_NETWORK_NODE_LAYER_1``

``TOPOQ_TOPOLOGY`` carries the labels unchanged as a JSON object, highest level first.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import GPU_SHARE, gpus_text
from topoq.domain.job import Allocation
from topoq.domain.placement import DomainAssignment
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.workload import WorkloadSpec
from topoq.engine.ports import ExecutorCapabilities, ExecutorStartFailed

LOCAL_MASTER_ADDR = "127.0.0.1"
"""Every virtual node is this machine, so the rendezvous address is the loopback."""
TOPOLOGY_PREFIX = "TOPOQ_TOPOLOGY_"
_NOT_NAME_CHARACTER = re.compile(r"[^A-Z0-9]")


@dataclass(frozen=True)
class PodPlan:
    """One pod of a gang: its place in the job and the GPUs it asks for."""

    rank: int
    pod_set: str
    node: str
    local_rank: int
    local_world_size: int
    """How many pods of the gang share this pod's node."""
    node_rank: int
    gpus: int
    gpu_devices: tuple[int, ...] | None = None
    """The node's GPU devices the scheduler packed it on (nodes open to GPU shares); None:
    any ``gpus`` free ones."""
    gpu_milli: int = 0
    """Its share of one GPU in thousandths (``topoq.io/gpu-milli``), 0 for whole GPUs."""


@dataclass(frozen=True)
class _Slot:
    rank: int
    pod_set: str
    node: str
    gpus: int
    gpu_devices: tuple[int, ...] | None
    gpu_milli: int


def refuse_gpu_shares(
    workload: WorkloadSpec,
    executor: ExecutorCapabilities,
    *,
    error: type[InvalidInputError] = ExecutorStartFailed,
    hint: str = "ask for whole GPUs on this engine, or run shares with the local executor",
) -> None:
    """Raise ``error`` when a pod asks for a share of a GPU and ``executor`` cannot confine a
    pod to part of a device (``shares_gpus``; the local executor hands it the device it was
    packed on, docs/gpu-sharing.md): at an executor's start, or at submission."""
    if executor.shares_gpus:
        return
    for pod_set in workload.pod_sets:
        share = pod_set.requests.amount(GPU_SHARE)
        if share:
            raise error(
                f"pod set {pod_set.name!r} asks for a share of a GPU ({gpus_text(0, share)} per "
                f"pod), and the {executor.name} executor cannot give a pod part of a GPU",
                hint=hint,
            )


def plan_pods(workload: WorkloadSpec, allocation: Allocation) -> tuple[PodPlan, ...]:
    """Every pod of the gang in rank order, with its node, local rank and node rank."""
    slots = _slots_in_rank_order(workload, allocation)
    node_rank: dict[str, int] = {}
    pods_on_node: Counter[str] = Counter(slot.node for slot in slots)
    placed_on_node: Counter[str] = Counter()
    plans = []
    for slot in slots:
        node_rank.setdefault(slot.node, len(node_rank))
        plans.append(
            PodPlan(
                rank=slot.rank,
                pod_set=slot.pod_set,
                node=slot.node,
                local_rank=placed_on_node[slot.node],
                local_world_size=pods_on_node[slot.node],
                node_rank=node_rank[slot.node],
                gpus=slot.gpus,
                gpu_devices=slot.gpu_devices,
                gpu_milli=slot.gpu_milli,
            )
        )
        placed_on_node[slot.node] += 1
    return tuple(plans)


def _slots_in_rank_order(workload: WorkloadSpec, allocation: Allocation) -> list[_Slot]:
    requests = {pod_set.name: pod_set.requests for pod_set in workload.pod_sets}
    slots: list[_Slot] = []
    for outcome in allocation.placement.pod_sets:
        where = f"pod set {outcome.name!r} of {allocation.placement.workload!r}"
        if not outcome.assigned or outcome.name not in requests:
            raise InvalidInputError(
                "has no placement to launch", where=where, hint="launch only admitted jobs"
            )
        gpus = requests[outcome.name].amount(NVIDIA_GPU)
        milli = requests[outcome.name].amount(GPU_SHARE)
        for assignment in sorted(outcome.assignments, key=lambda a: a.first_rank):
            node = node_of(assignment)
            devices = assignment.gpu_devices
            for pod in range(assignment.count):
                given = devices[pod] if pod < len(devices) else None
                slots.append(_Slot(len(slots), outcome.name, node, gpus, given, milli))
    return slots


def node_of(assignment: DomainAssignment) -> str:
    """The node's name, or the pooled leaf's label value when the leaf is not a single node."""
    if assignment.node is not None:
        return assignment.node
    if not assignment.domain:
        raise InvalidInputError(
            "an assignment names neither a node nor a domain", hint="launch placed jobs only"
        )
    return list(assignment.domain.values())[-1]


def hosts_in_node_rank_order(plans: Sequence[PodPlan]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(plan.node for plan in plans))


def topology_variable(label: str) -> str:
    """The variable that carries a topology label: ``TOPOQ_TOPOLOGY_`` + the mangled label."""
    return TOPOLOGY_PREFIX + _NOT_NAME_CHARACTER.sub("_", label.upper())


@dataclass(frozen=True)
class GangContext:
    """What every pod of one attempt shares."""

    job: str
    attempt: int
    world_size: int
    hosts: tuple[str, ...]
    master_port: int
    node_labels: Mapping[str, Mapping[str, str]]


def launcher_environment(
    context: GangContext, plan: PodPlan, gpu_indices: Sequence[int]
) -> dict[str, str]:
    """The variables topoq sets for one pod (documented in docs/executors.md)."""
    labels = dict(context.node_labels.get(plan.node, {}))
    variables = {
        "WORLD_SIZE": str(context.world_size),
        "RANK": str(plan.rank),
        "LOCAL_RANK": str(plan.local_rank),
        "LOCAL_WORLD_SIZE": str(plan.local_world_size),
        "NODE_RANK": str(plan.node_rank),
        "MASTER_ADDR": LOCAL_MASTER_ADDR,
        "MASTER_PORT": str(context.master_port),
        "TOPOQ_MASTER_NODE": context.hosts[0],
        "TOPOQ_JOB_ID": context.job,
        "TOPOQ_ATTEMPT": str(context.attempt),
        "TOPOQ_POD_SET": plan.pod_set,
        "TOPOQ_NODE": plan.node,
        "TOPOQ_HOSTS": ",".join(context.hosts),
        "SM_CURRENT_HOST": plan.node,
        "SM_HOSTS": json.dumps(list(context.hosts)),
        "SM_NUM_GPUS": str(len(gpu_indices)),
        "CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in gpu_indices),
        "TOPOQ_TOPOLOGY": json.dumps(labels),
    }
    if plan.gpu_milli:
        variables["TOPOQ_GPU_SHARE"] = gpus_text(0, plan.gpu_milli)
    variables.update({topology_variable(key): value for key, value in labels.items()})
    return variables
