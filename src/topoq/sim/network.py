"""How placement turns into run time: a communication cost model for the simulator.

A distributed job's iteration is compute plus exposed communication. Its communication is an
all-reduce over its data-parallel ranks, done hierarchically over the topology (GPUs of a node
over NVLink, then nodes under a leaf switch, then the leaf domains under a spine, and so on),
each stage a ring priced by the alpha-beta model (Thakur, Rabenseifner and Gropp, 2005): a ring
of ``k`` members moving ``M`` bytes takes ``2(k-1)·α + 2(k-1)/k · M/B``. Summed over the
stages the job's gang spans::

    T(P) = Σ_stage [ 2(k_s - 1)·α_s + 2(k_s - 1)/k_s · M / (B_s / c_s) ]

``k_s`` is the most members the job has under one switch of that stage, ``α_s`` the stage's
latency, ``B_s`` the bandwidth per member (NVLink inside a node, the node's network bandwidth
above it) and ``c_s ≥ 1`` the contention on the uplinks the stage crosses: the uplink of a
domain with oversubscription ``o`` carries ``size·B/o``; every running job whose gang leaves
the domain asks ``B`` for each of its nodes inside it; ``c`` is asked over carried, at least 1
(a non-blocking uplink is never contended). A job that spends the share ``s`` of an iteration
communicating at its tightest placement alone on an empty cluster (``P*``: its pods packed on
the fewest nodes in the smallest domain that holds them) runs ``(1 - s) + s·T(P)/T(P*)`` times
as long: 1 at ``P*`` and growing with spread and contention (docs/simulate.md).

Pods are never split across nodes, so tensor-parallel groups that fit in a pod stay inside its
node's NVLink domain; only the data-parallel traffic between pods crosses the network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from topoq.core.tree import IntArray, TopologyTree
from topoq.discovery.documents import Fields, read_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.domain.quantity import NVIDIA_GPU


@dataclass(frozen=True)
class Stage:
    """The switches that join sibling domains of one level of the tree."""

    latency_us: float
    oversubscription: float = 1.0
    """Of the uplinks of the domains the stage joins (1: non-blocking)."""


DEFAULT_STAGES = (Stage(5.0), Stage(10.0), Stage(20.0, 8.0))
"""From the bottom: the leaf switch joining nodes, the spine joining leaf domains (both
non-blocking), and the core joining spines, 8:1 oversubscribed (p5-class defaults); a tree
deeper than three network stages repeats the last."""


@dataclass(frozen=True)
class NetworkModel:
    nvlink_gb_s: float = 400.0
    """Bandwidth per GPU inside a node's NVLink domain."""
    nvlink_latency_us: float = 2.0
    node_gb_s: float = 360.0
    """Network bandwidth per node."""
    stages: tuple[Stage, ...] = DEFAULT_STAGES
    """From the stage joining nodes upwards."""
    message_gb: float = 1.0
    """What one all-reduce moves (the gradients of one iteration)."""

    def stage(self, from_bottom: int) -> Stage:
        return self.stages[min(from_bottom, len(self.stages) - 1)]


def default_communication_share(gpus: int, gpus_per_node: int = 8) -> float:
    """The share of an iteration spent communicating at the tightest placement, by size: none
    on one node, 0.1 up to 64 GPUs, 0.2 for larger training."""
    if gpus <= gpus_per_node:
        return 0.0
    return 0.1 if gpus <= 64 else 0.2


@dataclass
class _Running:
    share: float
    tight_s: float
    """``T(P*)``."""
    gpus_on_a_node: int
    members: list[int]
    """``k`` per level, from the top."""
    crossed: list[tuple[int, int, int]] = field(default_factory=list)
    """(level, domain, the job's nodes in it) of each oversubscribed domain its gang leaves."""


class NetworkState:
    """The running jobs' traffic on one tree, and each job's slow-down from it."""

    def __init__(self, tree: TopologyTree, model: NetworkModel | None = None) -> None:
        self.tree, self.model = tree, model or NetworkModel()
        self._levels = [level.domain_of_node for level in tree.levels]
        self._sizes = [np.diff(level.node_start) for level in tree.levels]
        self._parents = [level.parent for level in tree.levels]
        depth = len(tree.levels)
        self._stages = [self.model.stage(depth - 1 - level) for level in range(depth)]
        """The stage joining each level's domains (the top level's: the core above it)."""
        column = tree.resource_column.get(NVIDIA_GPU)
        self._gpus_per_node = (
            int(tree.capacity[:, column].max()) if column is not None and len(tree.nodes) else 0
        )
        self._jobs: dict[JobId, _Running] = {}
        self._asked: dict[tuple[int, int], int] = {}
        """Nodes of crossing jobs in each oversubscribed domain."""
        self._crossing: dict[tuple[int, int], set[JobId]] = {}

    def start(
        self, job: JobId, gpus_on_node: Mapping[int, int], pod_gpus: Sequence[int], share: float
    ) -> set[JobId]:
        """The job (pods of ``pod_gpus`` GPUs, spending ``share`` of an iteration communicating
        at its tightest) runs on the nodes (by index) with so many GPUs on each; the other
        running jobs whose slow-down its traffic changes."""
        if len(gpus_on_node) <= 1:  # on one node: never slowed, crosses nothing (most jobs)
            self._jobs[job] = _Running(0.0, 0.0, 0, [])
            return set()
        nodes = np.fromiter(sorted(gpus_on_node), dtype=np.int64)
        members, crossed = self._spread(nodes)
        running = _Running(
            share,
            self._tight_s(sorted(pod_gpus, reverse=True)),
            max(gpus_on_node.values(), default=0),
            members,
            crossed,
        )
        self._jobs[job] = running
        touched: set[JobId] = set()
        for level, domain, count in crossed:
            key = (level, domain)
            self._asked[key] = self._asked.get(key, 0) + count
            others = self._crossing.setdefault(key, set())
            touched |= others
            others.add(job)
        return touched

    def end(self, job: JobId) -> set[JobId]:
        """The job stopped; the running jobs whose slow-down that changes."""
        running = self._jobs.pop(job, None)
        if running is None:
            return set()
        touched: set[JobId] = set()
        for level, domain, count in running.crossed:
            key = (level, domain)
            self._asked[key] -= count
            others = self._crossing[key]
            others.discard(job)
            touched |= others
        return touched

    def slowdown(self, job: JobId) -> float:
        """How many times as long the job's run takes as at its tightest placement alone (1
        for a job that does not communicate)."""
        running = self._jobs[job]
        if running.share <= 0 or running.tight_s <= 0:
            return 1.0
        contention = [1.0] * len(self._levels)
        for level, domain, _ in running.crossed:
            carried = self._sizes[level][domain] / self._stages[level].oversubscription
            contention[level] = max(contention[level], self._asked[(level, domain)] / carried)
        spent = self._time_s(running.gpus_on_a_node, running.members, contention)
        # a Python float: the sizes it is worked out from are numpy's, and the log's JSON and
        # its comparisons want a plain number
        return float(max(1.0, (1 - running.share) + running.share * spent / running.tight_s))

    # --- the formula -----------------------------------------------------------------
    def _spread(self, nodes: IntArray) -> tuple[list[int], list[tuple[int, int, int]]]:
        """``k`` per level, and the oversubscribed domains the gang leaves."""
        members: list[int] = []
        crossed: list[tuple[int, int, int]] = []
        for level, domain_of_node in enumerate(self._levels):
            domains, counts = np.unique(domain_of_node[nodes], return_counts=True)
            parents = self._parents[level]
            if parents is None or level == 0:
                members.append(len(domains))
            else:
                members.append(int(np.unique(parents[domains], return_counts=True)[1].max()))
            if len(domains) > 1 and self._stages[level].oversubscription > 1:
                crossed.extend(
                    (level, int(d), int(c))
                    for d, c in zip(domains.tolist(), counts.tolist(), strict=True)
                )
        return members, crossed

    def _time_s(
        self, gpus_on_a_node: int, members: Sequence[int], contention: Sequence[float]
    ) -> float:
        model = self.model
        spent = _ring_s(
            gpus_on_a_node, model.nvlink_latency_us, model.nvlink_gb_s, model.message_gb
        )
        for level, k in enumerate(members):
            stage = self._stages[level]
            bandwidth = model.node_gb_s / contention[level]
            spent += _ring_s(k, stage.latency_us, bandwidth, model.message_gb)
        return spent

    def _tight_s(self, pod_gpus: Sequence[int]) -> float:
        """``T(P*)``: the pods packed on the fewest nodes (first fit, largest first), in the
        smallest domain that holds them, alone on an empty cluster."""
        per_node = self._gpus_per_node
        bins: list[int] = []
        for gpus in pod_gpus:
            fitting = next((at for at, free in enumerate(bins) if free >= gpus), None)
            if fitting is None:
                bins.append(max(per_node - gpus, 0))
            else:
                bins[fitting] -= gpus
        nodes = max(len(bins), 1)
        members, contention = [], []
        for level, sizes in enumerate(self._sizes):
            largest = int(sizes.max())
            used = math.ceil(nodes / largest)
            if level == 0:
                k = used
            else:
                k = min(used, math.ceil(int(self._sizes[level - 1].max()) / largest))
            members.append(k)
            carried = largest / self._stages[level].oversubscription
            contention.append(max(1.0, min(nodes, largest) / carried) if used > 1 else 1.0)
        on_a_node = min(sum(pod_gpus), per_node) if per_node else 0
        return self._time_s(on_a_node, members, contention)


def _ring_s(members: int, latency_us: float, gb_s: float, message_gb: float) -> float:
    """One ring all-reduce of ``message_gb`` over ``members`` (alpha-beta)."""
    if members <= 1:
        return 0.0
    return 2 * (members - 1) * latency_us * 1e-6 + 2 * (members - 1) / members * message_gb / gb_s


_NETWORK_KEYS = ("nvlinkGBps", "nvlinkLatencyUs", "nodeGBps", "messageGB", "stages")
_STAGE_KEYS = ("latencyUs", "oversubscription")


def read_network(path: Path | str) -> NetworkModel:
    """A cost model from a YAML or JSON file (``topoq simulate --network FILE``); any key left
    out keeps its default. Every error names the file and the field."""
    source = str(path)
    document = read_document(path)  # its errors name the file already
    try:
        fields = Fields(document, "")
        fields.reject_unknown_keys(_NETWORK_KEYS, listed=_NETWORK_KEYS)
        default = NetworkModel()
        stages = tuple(_stage(stage) for stage in fields.records("stages"))
        return NetworkModel(
            nvlink_gb_s=_positive(fields, "nvlinkGBps", default.nvlink_gb_s),
            nvlink_latency_us=_positive(fields, "nvlinkLatencyUs", default.nvlink_latency_us),
            node_gb_s=_positive(fields, "nodeGBps", default.node_gb_s),
            stages=stages or default.stages,
            message_gb=_positive(fields, "messageGB", default.message_gb),
        )
    except InvalidInputError as error:
        raise error.located(source) from None


def _stage(fields: Fields) -> Stage:
    fields.reject_unknown_keys(_STAGE_KEYS, listed=_STAGE_KEYS)
    oversubscription = _positive(fields, "oversubscription", 1.0)
    if oversubscription < 1:
        raise InvalidInputError(
            f"must be at least 1, got {oversubscription:g}",
            where=fields.path("oversubscription"),
            hint="1 is a non-blocking uplink, 8 an 8:1 oversubscribed one",
        )
    return Stage(_positive(fields, "latencyUs", None), oversubscription)


def _positive(fields: Fields, key: str, default: float | None) -> float:
    value = fields.raw(key) if default is None else fields.raw(key, default)
    if value is None:
        fields.required(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"expected a number, got {value!r}", where=fields.path(key))
    if value <= 0:
        raise InvalidInputError(f"must be above 0, got {value:g}", where=fields.path(key))
    return float(value)
