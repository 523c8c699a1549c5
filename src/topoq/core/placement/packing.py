"""Packing single pods by fragmentation, on clusters with nodes open to GPU shares
(docs/gpu-sharing.md, "Packing by fragmentation").

A pod set of one pod spans one node whatever the topology, so the topology has no choice to
make for it; on a cluster where some nodes are open to shares, which node (and, for a share,
which device) it takes decides how much of the idle GPU the pods that typically come can still
use. There the scheduler takes the node that grows the cluster's fragmentation least against
the **task mix** — the typical tasks (``gpu_devices.typical_tasks``) of the pods of every
unfinished job, on the cluster or waiting for it — scored as FGD scores it, ties to the
tightest node (``gpu_devices.ties_to_tightest``). A pod that asks for no GPU is packed so too:
the CPU it takes on a GPU node can leave that node's GPUs to no one. Everything else (gangs,
clusters with no node open to shares, or whose jobs ask for no GPU) is placed by the
topology-aware descent, unchanged.

A task class is its CPU, GPU count, share of each GPU and the GPU models it accepts: the
models (``GPU_MODEL_LABEL``) of the nodes its selectors, affinity and tolerations leave it
(``eligibility_of``); a pod eligible on nodes of every model accepts any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from topoq.core.eligibility import eligibility_key, eligibility_of
from topoq.core.gpu_devices import (
    WHOLE_GPU_MILLI,
    DeviceRoom,
    FloatArray,
    GpuAsk,
    TaskMix,
    best_scored,
    fragmentation_growth,
    fragmentation_points,
    ties_to_tightest,
    typical_of_counts,
)
from topoq.core.ledger import CapacityLedger
from topoq.core.tree import IntArray, TopologyTree
from topoq.domain.gpu_share import GPU_MODEL_LABEL, GPU_SHARE
from topoq.domain.quantity import CPU, MEMORY, NVIDIA_GPU
from topoq.domain.workload import PodSetSpec

TaskClass = tuple[int, int, int, frozenset[int]]
"""A pod's CPU (millicores), GPU count, share of each GPU (thousandths) and accepted models."""


@dataclass(frozen=True, eq=False)
class Packing:
    """What packing by fragmentation needs beside the ledger: the task mix. Compared and
    hashed by identity: a ledger's figures are kept under the packing they were scored by."""

    mix: TaskMix


def packing_for(tree: TopologyTree, pod_sets: Iterable[tuple[PodSetSpec, int]]) -> Packing | None:
    """The packing of a cluster whose unfinished jobs have ``pod_sets`` (each with its pods),
    or None where there is nothing to pack by: no node open to shares, or no GPU pod."""
    if not tree.shares_gpus.any() or not tree.leaves_are_nodes:
        return None
    counted: Counter[TaskClass] = Counter()
    for pod_set, pods in pod_sets:
        counted[task_class(tree, pod_set)] += pods
    if not any(count for _, count, _, _ in counted):
        return None
    return Packing(typical_of_counts(counted, len(_models(tree)[1])))


def task_class(tree: TopologyTree, pod_set: PodSetSpec) -> TaskClass:
    """The task class of one pod of ``pod_set`` (a GPU count of 0: it asks for no GPU, and
    accepts any model)."""
    requests = pod_set.requests
    key = ("task class", requests, *eligibility_key(pod_set))
    known = tree.memo(key)
    if isinstance(known, tuple):
        return known
    whole, share = requests.amount(NVIDIA_GPU), requests.amount(GPU_SHARE)
    if not whole and not share:
        found: TaskClass = (requests.amount(CPU), 0, 0, frozenset())
    else:
        count, milli = (1, share) if share else (whole, WHOLE_GPU_MILLI)
        found = (requests.amount(CPU), count, milli, _accepted_models(tree, pod_set))
    tree.remember(key, found)
    return found


def pack_one(
    ledger: CapacityLedger, pod_set: PodSetSpec, leaf_room: IntArray
) -> tuple[int, int | None] | None:
    """The node (and, for a share, the device) one pod of ``pod_set`` takes by fragmentation
    among the nodes with room for it (``leaf_room``: pods per node), or None when packing does
    not choose for it (no packing on the ledger, no node with room). A pod that asks for no
    GPU is packed too: the CPU it takes on a GPU node can leave that node's GPUs to no one."""
    packing = ledger.packing
    if packing is None:
        return None
    fit = np.flatnonzero(leaf_room > 0)
    if not len(fit):
        return None
    cpu, count, milli, models = task_class(ledger.tree, pod_set)
    ask = GpuAsk(cpu=cpu, count=count, milli=milli, models=models)
    tree, mix = ledger.tree, packing.mix

    def scored(free: IntArray, rows: IntArray | None) -> IntArray:
        nodes = np.arange(len(free)) if rows is None else rows
        room = _room_of(tree, free, nodes)
        growth, device = fragmentation_growth(room, ask, mix, np.arange(len(free)))
        return fragmentation_points(growth) * _DEVICES + device + 1

    # kept on the ledger across charges: a node's score moves only when the node is charged
    score = ledger.per_node(("fragmentation points", packing, ask), scored)[fit]
    points, device = score // _DEVICES, score % _DEVICES - 1
    slack = _slack(tree, ledger.free, ask, fit) if ties_to_tightest(ask, mix) else None
    chosen = best_scored(points, slack)
    return int(fit[chosen]), (int(device[chosen]) if ask.shares_a_device else None)


_DEVICES = 1024
"""Above any device index + 1: a node's score and device kept as one number."""


def device_room(ledger: CapacityLedger) -> DeviceRoom:
    """Every node's free CPU, memory and GPU devices as ``gpu_devices`` counts them: a node
    open to shares by its devices, any other by its whole free GPUs (its devices are never
    shared, so each is whole or taken)."""
    return _room_of(ledger.tree, ledger.free, np.arange(len(ledger.tree.nodes)))


def _room_of(tree: TopologyTree, free: IntArray, nodes: IntArray) -> DeviceRoom:
    """``device_room`` of ``nodes``, whose rows of free capacity are ``free``."""
    columns = tree.resource_column

    def column(name: str) -> IntArray:
        at = columns.get(name)
        return free[:, at] if at is not None else np.zeros(len(free), dtype=np.int64)

    opened = tree.shares_gpus[nodes]
    shared = len(tree.device_columns)
    slots = _slots(tree)
    whole = column(NVIDIA_GPU)
    devices = np.where(np.arange(slots)[None, :] < whole[:, None], WHOLE_GPU_MILLI, 0)
    devices = devices.astype(np.int64)
    if shared:
        devices[opened, :shared] = free[opened][:, tree.device_columns]
        devices[opened, shared:] = 0
    model = _models(tree)[0][nodes]
    return DeviceRoom(column(CPU), column(MEMORY), devices, model, int(devices.sum()))


def _slack(tree: TopologyTree, free: IntArray, ask: GpuAsk, nodes: IntArray) -> FloatArray:
    """What each of ``nodes`` has left after the pod, by best fit's measure: CPU and GPU left,
    each over the most a node of the cluster has, weighed alike."""
    room = _room_of(tree, free[nodes], nodes)
    cpu_span, gpu_span = _spans(tree)
    cpu_left = (room.cpu - ask.cpu) / cpu_span
    gpu_left = (room.devices.sum(axis=1) - ask.gpu_milli) / gpu_span
    return np.asarray(0.5 * cpu_left + 0.5 * gpu_left, dtype=np.float64)


def _slots(tree: TopologyTree) -> int:
    """Device slots per node: the most devices a node open to shares keeps, or GPUs a node
    has."""
    known = tree.memo("packing device slots")
    if isinstance(known, int):
        return known
    gpus = int(tree.capacity[:, tree.resource_column[NVIDIA_GPU]].max())
    slots = max(len(tree.device_columns), gpus)
    tree.remember("packing device slots", slots)
    return slots


def _spans(tree: TopologyTree) -> tuple[float, float]:
    """The most CPU (millicores) and GPU (thousandths) a node of the tree has."""
    known = tree.memo("packing spans")
    if isinstance(known, tuple):
        return known
    columns, capacity = tree.resource_column, tree.capacity
    cpu = int(capacity[:, columns[CPU]].max()) if CPU in columns else 0
    gpu = int(capacity[:, columns[NVIDIA_GPU]].max()) * WHOLE_GPU_MILLI
    spans = (float(max(cpu, 1)), float(max(gpu, 1)))
    tree.remember("packing spans", spans)
    return spans


def _models(tree: TopologyTree) -> tuple[IntArray, tuple[str | None, ...]]:
    """Each node's GPU model as an index, and the models in index order (nodes without the
    label are a model of their own, None)."""
    known = tree.memo("gpu models")
    if isinstance(known, tuple):
        return known
    labels = [node.labels.get(GPU_MODEL_LABEL) for node in tree.nodes]
    names = tuple(sorted(set(labels), key=lambda name: (name is None, name or "")))
    index = {name: at for at, name in enumerate(names)}
    found = (np.asarray([index[name] for name in labels], dtype=np.int64), names)
    tree.remember("gpu models", found)
    return found


def _accepted_models(tree: TopologyTree, pod_set: PodSetSpec) -> frozenset[int]:
    """The models of the GPU nodes the pod set is eligible on; empty when that is every model
    (it accepts any)."""
    model = _models(tree)[0]
    gpu_nodes = tree.capacity[:, tree.resource_column[NVIDIA_GPU]] > 0
    eligible = eligibility_of(tree, pod_set).mask & gpu_nodes
    accepted = frozenset(int(at) for at in np.unique(model[eligible]))
    every = frozenset(int(at) for at in np.unique(model[gpu_nodes]))
    return frozenset() if accepted >= every else accepted
