"""What the API works on: the store, the topology, the executor's logs and a way to wake the
controller; and the one path an inventory change takes (``apply_inventory``: the API's
``POST /cluster/apply`` and a start on another ``--cluster`` file)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast

from topoq.api.cluster_limits import ClusterLimits
from topoq.core.inventory_diff import InventoryDiff, displacement, inventory_diff
from topoq.core.lifecycle import advance
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import Diagnostic
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE, opens_gpus_to_shares
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.lint import LintFinding
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.topology import TopologySpec
from topoq.engine.event_log import MAX_LISTED_NODES, ServerEvent, requeued, write_event
from topoq.engine.intake import Intake
from topoq.engine.metrics import MetricsSource
from topoq.engine.ports import AuditEntry, ExecutorCapabilities, LogReader, Store
from topoq.engine.tree_cache import TreeCache
from topoq.store.records import JobEvent, PolicyVersion, TokenRecord
from topoq.store.sql_store import InventoryWrite

log = logging.getLogger("topoq.inventory")
T = TypeVar("T")


class ServiceStore(Store, Protocol):
    """The engine's store plus the queries and tokens the API needs (``SqlStore`` has them)."""

    def list_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[JobView]: ...

    def count_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
    ) -> int: ...

    def count_jobs_by_team_and_phase(
        self, teams: Collection[str]
    ) -> dict[tuple[str, JobPhase], int]: ...

    def diagnostic(self, job_id: JobId) -> Diagnostic | None: ...

    def change_marks(self) -> tuple[int, ...]:
        """Marks that move with every change a view shows (``SqlStore.change_marks``)."""

    def diagnostics(self, job_ids: Collection[JobId]) -> dict[JobId, Diagnostic]: ...

    def policy_at(self, version: int) -> ClusterPolicy | None: ...

    def job_events_between(
        self,
        start_s: float,
        end_s: float,
        *,
        team: str | None = None,
        holding_at_start: bool = False,
    ) -> list[JobEvent]: ...

    def job_history(self, job_id: JobId) -> list[JobEvent]: ...

    def policy_versions(self) -> list[PolicyVersion]: ...

    def count_jobs_submitted_between(self, start_s: float, end_s: float) -> int: ...

    def submission_span(self) -> tuple[float, float] | None: ...

    def jobs_submitted_between(self, start_s: float, end_s: float) -> dict[JobId, JobView]: ...

    def create_token(
        self, name: str, role: str, teams: Collection[str] = (), *, now: float | None = None
    ) -> tuple[str, TokenRecord]: ...

    def token_for(self, plaintext: str) -> TokenRecord | None: ...

    def cached_token(self, plaintext: str) -> TokenRecord | None:
        """``token_for``'s answer if it is remembered and still trusted, without I/O."""

    def revoke_token(self, token_id: str, *, now: float | None = None) -> TokenRecord: ...

    def tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]: ...

    def change_inventory(
        self,
        decide: Callable[[list[NodeSpec], dict[JobId, JobView]], tuple[InventoryWrite, T]],
        *,
        now: float,
    ) -> T:
        """The inventory, the jobs it requeues and its audit entry in one transaction."""


NODE_SIZES_REFRESH_S = 2.0
"""How stale the largest node's resources may be at intake (the inventory changes only
when it is applied: ``POST /cluster/apply``, a start on a new cluster file)."""


def largest_amounts(nodes: Collection[NodeSpec]) -> dict[str, int]:
    """The most of each resource one node has."""
    largest: dict[str, int] = {}
    for node in nodes:
        for name, amount in node.allocatable.items():
            largest[name] = max(largest.get(name, 0), amount)
        if node.allocatable.amount(NVIDIA_GPU) and opens_gpus_to_shares(node.labels):
            largest[GPU_SHARE] = GPU_MILLI_PER_GPU  # a share of one of its GPUs
    return largest


class NodeSizes:
    """``largest_amounts`` of the stored nodes, read again at most every ``refresh_s``, so
    that a submission does not read the whole inventory."""

    def __init__(self, read_nodes: Callable[[], Collection[NodeSpec]], refresh_s: float) -> None:
        self._read_nodes = read_nodes
        self._refresh_s = refresh_s
        self._largest: dict[str, int] = {}
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def largest(self) -> Mapping[str, int]:
        with self._lock:
            now = time.monotonic()
            if self._read_at is None or now - self._read_at >= self._refresh_s:
                self._largest = largest_amounts(self._read_nodes())
                self._read_at = now
            return self._largest


@dataclass
class Service:
    """What the API process holds. It never runs a cycle that commits nor talks to an
    executor: changes go to the store (``intake``) and the controller — in its own process
    under ``topoq server`` — acts on them at its next step, which ``wake`` asks for."""

    store: ServiceStore
    topology: TopologySpec
    clock: Callable[[], float] = time.time
    logs: LogReader | None = None
    wake: Callable[[], None] = lambda: None
    """Asks the controller for a step now (after a submission or any other change)."""
    metrics: MetricsSource | None = None
    """What ``GET /metrics`` serves (the controller's latest published metrics)."""
    inventory_from_executor: bool = False
    """The executor reports the cluster's nodes (Kubernetes): no cluster file is applied."""
    executor: ExecutorCapabilities | None = None
    """What the server's executor can do (None: not known, nothing is warned about): a
    submission naming an image one that runs no containers ignores is told so."""
    intake: Intake = field(init=False)
    trees: TreeCache = field(init=False)
    node_sizes: NodeSizes = field(init=False)
    """The most of each resource one stored node has: a pod asking for more is refused."""
    limits: ClusterLimits = field(init=False)
    """The configured cluster: a job it could never admit under the policy is refused."""
    cycle_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held around the read-only cycles ``explain`` runs: they place on the shared tree."""
    _kept: dict[str, tuple[tuple[int, ...], float, object]] = field(default_factory=dict)
    _kept_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.intake = Intake(self.store, self.clock)
        self.trees = TreeCache(self.topology)
        self.node_sizes = NodeSizes(self.store.nodes, NODE_SIZES_REFRESH_S)
        self.limits = ClusterLimits(self.store.nodes, self.topology, NODE_SIZES_REFRESH_S)

    def kept(self, name: str, work: Callable[[], T], max_age_s: float) -> T:
        """``work()``'s answer, kept under ``name`` and given again while the store's change
        marks stay the same, for at most ``max_age_s`` (what time alone moves). One request
        works it out at a time: dashboards polling a dear figure share it."""
        with self._kept_lock:
            marks = self.store.change_marks()
            kept = self._kept.get(name)
            if kept is not None and kept[0] == marks and time.monotonic() - kept[1] < max_age_s:
                return cast(T, kept[2])
            value = work()
            self._kept[name] = (marks, time.monotonic(), value)
            return value

    def tree(self) -> TopologyTree:
        """The topology tree of the stored nodes (rebuilt when they changed)."""
        return self.trees.tree(self.store.nodes())


# --- inventory changes --------------------------------------------------------------------
def apply_inventory(
    store: ServiceStore,
    wanted: Sequence[NodeSpec],
    *,
    actor: str,
    source: str,
    drain: bool,
    dry_run: bool,
    now: float,
    refusal_hint: str,
) -> tuple[InventoryDiff, list[JobView]]:
    """Make ``wanted`` (a cluster file's nodes, read from ``source``) the inventory: the
    difference and the gangs requeued. A change that displaces gangs (a node removed or
    shrunk below what runs on it, ``core.inventory_diff``) raises ``InvalidInputError``
    (``refusal_hint`` says what to do) unless ``drain``: then they go back to the queue, as a
    drain sends them, in the same transaction as the new inventory and its audit entry. A dry
    run, or no difference, writes nothing."""
    seen = inventory_diff(store.nodes(), wanted, store.holding_jobs().values())
    if dry_run or seen.empty:
        return seen, []
    cause = f"its node was removed or shrunk by {actor}'s inventory change; the gang is requeued"

    def decide(
        nodes: list[NodeSpec], holding: dict[JobId, JobView]
    ) -> tuple[InventoryWrite, tuple[InventoryDiff, list[JobView]]]:
        diff = inventory_diff(nodes, wanted, holding.values())
        refusal = displacement(diff)
        if refusal is not None and not drain:
            raise InvalidInputError(refusal, where=source, hint=refusal_hint)
        moved = [
            advance(holding[job], JobPhase.PENDING, now=now, cause=cause) for job in diff.displaced
        ]
        audit = AuditEntry(now, actor, "inventory", source, inventory_detail(diff))
        return InventoryWrite(diff.nodes, moved, audit), (diff, moved)

    diff, moved = store.change_inventory(decide, now=now)
    write_event(log, inventory_applied(diff, actor=actor, source=source))
    for job in moved:
        write_event(log, requeued(job, cause))
    return diff, moved


def inventory_detail(diff: InventoryDiff) -> dict[str, object]:
    """The audit entry's detail of an applied difference."""
    return {
        "nodes": len(diff.nodes),
        "added": [str(node.name) for node in diff.added],
        "removed": [str(removed.node.name) for removed in diff.removed],
        "changed": [str(change.name) for change in diff.changed],
        "requeued": list(diff.displaced),
    }


def inventory_applied(diff: InventoryDiff, *, actor: str, source: str) -> ServerEvent:
    """The server-log event of an applied inventory change."""
    names = [str(node.name) for node in diff.added]
    names += [str(removed.node.name) for removed in diff.removed]
    names += [str(change.name) for change in diff.changed]
    return ServerEvent(
        "inventory_applied",
        f"{actor} applied the inventory of {source}: {len(diff.nodes)} nodes, "
        f"{len(diff.added)} added, {len(diff.removed)} removed, {len(diff.changed)} changed, "
        f"{len(diff.displaced)} gangs requeued",
        {
            "actor": actor,
            "source": source,
            "nodes": len(diff.nodes),
            "added": len(diff.added),
            "removed": len(diff.removed),
            "changed": len(diff.changed),
            "names": names[:MAX_LISTED_NODES],
            "requeued": list(diff.displaced),
        },
    )


def policy_finding(finding: LintFinding, *, version: int | None, source: str) -> ServerEvent:
    """The server-log event of a lint finding about the policy in force (or being set)."""
    return ServerEvent(
        "policy_lint",
        f"policy {f'version {version}' if version else source}: {finding.severity.value} "
        f"{finding.code.value}: {finding.message}",
        {
            "severity": finding.severity.value,
            "code": finding.code.value,
            "finding": finding.message,
            "hint": finding.hint,
            "version": version,
            "source": source,
        },
        level=logging.WARNING,
    )
