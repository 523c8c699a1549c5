"""Fragmentation: the free GPUs that no waiting gang can use, worked out after a run from its
decision log (the comparison table's *Fragmented*).

Over the simulated time during which at least one job asking for GPUs waits, the time-weighted
mean share of the cluster's GPUs (failed nodes included, as in the utilisation) that are free
on nodes where no waiting job's pod could go. A node's free GPUs are fragmented when every
pod of every waiting job asks for more GPUs than the node has free, or may not use the node
(its node selector, required node affinity or untolerated taints exclude it: the GPU model a
pod asks for, say). Quotas and topology requests are not looked at: a free GPU a waiting gang
could use by its pods' size but not by its team's quota, or not inside the domain its topology
request names, counts as usable. A failed node's GPUs are not free.

It is one pass over the log, keeping each node's free GPUs and, per class of nodes (nodes
every pod set of the run may use alike), how many nodes have each count of free GPUs and how
many waiting pod sets ask each count of GPUs: the fragmented GPUs after an instant are, per
class, the free GPUs on its nodes with fewer free than the smallest waiting ask that may use
it — work per instant that follows the classes and the GPUs per node, not the nodes or jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from topoq.domain.job import JobId
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.workload import NodeSelectorTerm, PodSetSpec, Toleration
from topoq.sim.log import JOINS_THE_QUEUE, LEAVES_THE_QUEUE, STOPS_A_RUN, Decision, LogEntry

_Constraint = tuple[
    tuple[tuple[str, str], ...], tuple[NodeSelectorTerm, ...], tuple[Toleration, ...]
]
"""What decides which nodes a pod set may use: node selector, affinity terms, tolerations."""


def fragmentation(
    entries: Iterable[LogEntry],
    nodes: Sequence[NodeSpec],
    pod_sets: Mapping[JobId, Sequence[PodSetSpec]],
    end_s: float,
) -> float | None:
    """The time-weighted mean share of the cluster's GPUs free but of use to no waiting job,
    over the time during which a job asking for GPUs waits, up to ``end_s`` (None: no such
    time, or no GPUs, or no nodes: a recorded history, which does not say where pods ran).
    ``entries``: the run's decision log, its admissions carrying ``gpus_on_nodes``;
    ``nodes``: the cluster at the start; ``pod_sets``: each submitted job's."""
    capacity = sum(node.allocatable.amount(NVIDIA_GPU) for node in nodes)
    if capacity <= 0:
        return None
    state = _Free(nodes, pod_sets)
    fragmented_s = 0.0  # GPU-seconds free and fragmented while a job waited
    waited_s = 0.0
    last = None
    for entry in entries:
        if last is not None and entry.t > last and state.waiting:
            fragmented_s += state.fragmented() * (entry.t - last)
            waited_s += entry.t - last
        last = entry.t
        state.apply(entry)
    if last is not None and end_s > last and state.waiting:
        fragmented_s += state.fragmented() * (end_s - last)
        waited_s += end_s - last
    if waited_s <= 0:
        return None
    return fragmented_s / (capacity * waited_s)


@dataclass
class _Node:
    cls: int
    free: int
    up: bool
    """Ready and schedulable: its free GPUs are free to use."""


class _Free:
    """The cluster's free GPUs and the waiting jobs' asks, as the log goes on."""

    def __init__(
        self, nodes: Sequence[NodeSpec], pod_sets: Mapping[JobId, Sequence[PodSetSpec]]
    ) -> None:
        self._pod_sets = pod_sets
        most = max((node.allocatable.amount(NVIDIA_GPU) for node in nodes), default=0)
        self._cap = most + 1
        """An ask of more GPUs than any node has counts as this (no node can take it)."""
        constraints: dict[_Constraint, int] = {}
        for sets in pod_sets.values():
            for pod_set in sets:
                if pod_set.requests.amount(NVIDIA_GPU) > 0:
                    constraints.setdefault(_constraint(pod_set), len(constraints))
        classes: dict[tuple[bool, ...], int] = {}
        self._nodes: dict[str, _Node] = {}
        for node in nodes:
            signature = tuple(_may_use(key, node) for key in constraints)
            cls = classes.setdefault(signature, len(classes))
            gpus = node.allocatable.amount(NVIDIA_GPU)
            self._nodes[node.name] = _Node(cls, gpus, node.schedulable)
        self._classes_of = {
            key: tuple(cls for signature, cls in classes.items() if signature[index])
            for key, index in constraints.items()
        }
        """The classes of nodes each constraint may use."""
        self._hist = [[0] * (self._cap + 1) for _ in classes]
        """Per class, how many nodes that are up have each count of free GPUs."""
        self._asks = [[0] * (self._cap + 1) for _ in classes]
        """Per class, how many waiting pod sets that may use it ask each count of GPUs."""
        for state in self._nodes.values():
            if state.up:
                self._hist[state.cls][state.free] += 1
        self._holding: dict[JobId, Mapping[str, int]] = {}
        self._queued: set[JobId] = set()
        self._held: set[JobId] = set()
        self._waiting: dict[JobId, tuple[tuple[int, tuple[int, ...]], ...]] = {}
        """Each waiting job asking for GPUs: per pod set, its GPUs per pod and the classes of
        nodes it may use."""
        self._fragmented: int | None = None

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    def fragmented(self) -> int:
        """The free GPUs no waiting pod may use (kept until something changes)."""
        if self._fragmented is None:
            total = 0
            for hist, asks in zip(self._hist, self._asks, strict=True):
                smallest = next((gpus for gpus, count in enumerate(asks) if count), len(asks))
                total += sum(free * hist[free] for free in range(1, min(smallest, len(hist))))
            self._fragmented = total
        return self._fragmented

    def apply(self, entry: LogEntry) -> None:
        decision, job = entry.decision, entry.job
        if job is None:
            if entry.node is not None and decision in (
                Decision.NODE_FAILED,
                Decision.NODE_RECOVERED,
            ):
                self._node_up(entry.node, decision is Decision.NODE_RECOVERED)
            return
        if decision is Decision.ADMIT:
            self._release(job)
            self._holding[job] = entry.gpus_on_nodes
            for name, gpus in entry.gpus_on_nodes.items():
                self._take(name, gpus)
            self._queued.discard(job)
        elif decision in STOPS_A_RUN:
            self._release(job)
        if decision in JOINS_THE_QUEUE:
            self._queued.add(job)
        elif decision in LEAVES_THE_QUEUE:
            self._queued.discard(job)
        elif decision is Decision.HOLD:
            self._held.add(job)
        elif decision is Decision.RELEASE:
            self._held.discard(job)
        self._wait(job, job in self._queued and job not in self._held)

    def _wait(self, job: JobId, waits: bool) -> None:
        if waits == (job in self._waiting):
            return
        if waits:
            asks = self._asks_of(job)
            if not asks:
                return
            self._waiting[job] = asks
            step = 1
        else:
            asks = self._waiting.pop(job)
            step = -1
        for gpus, classes in asks:
            for cls in classes:
                self._asks[cls][gpus] += step
        self._fragmented = None

    def _asks_of(self, job: JobId) -> tuple[tuple[int, tuple[int, ...]], ...]:
        asks = []
        for pod_set in self._pod_sets.get(job, ()):
            gpus = pod_set.requests.amount(NVIDIA_GPU)
            if gpus > 0:
                asks.append((min(gpus, self._cap), self._classes_of[_constraint(pod_set)]))
        return tuple(asks)

    def _take(self, name: str, gpus: int) -> None:
        node = self._nodes.get(name)
        if node is not None:
            self._set_free(node, node.free - gpus)

    def _release(self, job: JobId) -> None:
        for name, gpus in self._holding.pop(job, {}).items():
            self._take(name, -gpus)

    def _set_free(self, node: _Node, free: int) -> None:
        if node.up:
            hist = self._hist[node.cls]
            hist[node.free] -= 1
            hist[free] += 1
            self._fragmented = None
        node.free = free

    def _node_up(self, name: str, up: bool) -> None:
        node = self._nodes.get(name)
        if node is None or node.up == up:
            return
        self._hist[node.cls][node.free] += 1 if up else -1
        node.up = up
        self._fragmented = None


def _constraint(pod_set: PodSetSpec) -> _Constraint:
    return (
        tuple(sorted(pod_set.node_selector.items())),
        pod_set.affinity_terms,
        pod_set.tolerations,
    )


def _may_use(constraint: _Constraint, node: NodeSpec) -> bool:
    """Whether a pod set of ``constraint`` may go on ``node``, as the core's eligibility says:
    every selector label, one affinity term (if any), every scheduling taint tolerated."""
    selector, terms, tolerations = constraint
    labels = node.labels
    if any(labels.get(key) != value for key, value in selector):
        return False
    if terms and not any(term.matches(labels) for term in terms):
        return False
    return all(
        not taint.effect.blocks_scheduling
        or any(toleration.tolerates(taint) for toleration in tolerations)
        for taint in node.taints
    )
