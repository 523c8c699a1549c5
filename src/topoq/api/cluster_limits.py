"""The cluster as it is configured, for intake: every stored node counted as ready and
schedulable (a failed or cordoned node comes back), built into a topology tree that is read
again at most every ``refresh_s`` and rebuilt only when the inventory changed. A submission that
not even this cluster, empty, could ever hold is refused, naming the limit.

Quota is not checked here: a job over its team's guarantee plus borrow limit is accepted and
waits with ``NEVER_FITS_CURRENT_POLICY`` and the numbers, because policies change routinely (a
team may submit ahead of the quota raise it asked for), while the cluster's shape does not."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace

from topoq.core.admission import never_admissible
from topoq.core.holdings import capacity_by_flavor
from topoq.core.quota import QuotaBook
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobSpec, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.topology import TopologySpec


class ClusterLimits:
    """Thread-safe; checks run one at a time (they place on the shared tree)."""

    def __init__(
        self,
        read_nodes: Callable[[], Collection[NodeSpec]],
        topology: TopologySpec,
        refresh_s: float,
    ) -> None:
        self._read_nodes = read_nodes
        self._topology = topology
        self._refresh_s = refresh_s
        self._nodes: tuple[NodeSpec, ...] | None = None
        self._tree: TopologyTree | None = None
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def check(self, spec: JobSpec) -> None:
        """Raise ``InvalidInputError`` naming the limit when no flavor of the configured
        cluster could ever hold ``spec``: a pod set larger than any domain its topology request
        allows (its required level, its slices, its spread), or than the flavor."""
        with self._lock:
            tree = self._current()
            if not len(tree.nodes):
                return
            no_quota = QuotaBook(ClusterPolicy(), capacity_by_flavor(tree, INSTANCE_TYPE_LABEL))
            reasons = never_admissible(no_quota, tree, JobView(spec), INSTANCE_TYPE_LABEL)
        if reasons is None:
            return
        if not reasons:
            raise InvalidInputError(
                "no node of the cluster matches the job's node selectors",
                where="document (node selectors)",
                hint="select an instance type the cluster has",
            )
        first = reasons[0]
        raise InvalidInputError(
            f"the job can never run here: {first.message}",
            where=first.about,
            hint=first.remedies[0] if first.remedies else None,
        )

    def _current(self) -> TopologyTree:
        now = time.monotonic()
        if self._tree is None or self._read_at is None or now - self._read_at >= self._refresh_s:
            nodes = tuple(self._read_nodes())
            if self._tree is None or nodes != self._nodes:
                configured = [replace(n, ready=True, unschedulable=False) for n in nodes]
                self._tree = build_tree(configured, self._topology)
                self._nodes = nodes
            self._read_at = now
        return self._tree
