"""The controller: read a snapshot, run the cycle, commit, dispatch, feed outcomes back.

One ``step`` is: bring the executor in line with what users wrote to the store (stop the pods
of gangs cancelled, drained or requeued since, stop the work of nodes newly marked failed —
the API never talks to the executor, see ``topoq.engine.intake``), apply what the executor
reported since the last step, run one scheduling cycle on what the store holds, commit the
moves and decisions in one transaction, then tell the executor to cancel victims and start
admitted gangs. Commit comes before dispatch: after a crash the store never claims less than
what may be running, and ``recover`` reconciles. A cycle that raced a user's change commits
nothing (``ConcurrentUpdate``) and the next step decides again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from topoq.core.cycle import Snapshot, schedule
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.quota import QuotaBook
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import CycleResult
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeName, NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.engine.intake import SYSTEM, Intake
from topoq.engine.ports import (
    ConcurrentUpdate,
    Executor,
    ExecutorEvent,
    ExecutorEventKind,
    GangLaunch,
    Store,
)
from topoq.engine.tree_cache import TreeCache


class ControlPlaneMetricsLike(Protocol):
    """What the controller reports to (``topoq.engine.metrics.ControlPlaneMetrics``)."""

    def observe_step(
        self, report: StepReport, duration_s: float, jobs: Mapping[JobId, JobView]
    ) -> None: ...

    def observe_state(self, jobs: Mapping[JobId, JobView], book: QuotaBook) -> None: ...


@dataclass
class StepReport:
    """What one step did, for logs and metrics."""

    events: list[ExecutorEvent] = field(default_factory=list)
    result: CycleResult = field(default_factory=CycleResult)
    started: list[JobId] = field(default_factory=list)
    cancelled: list[JobId] = field(default_factory=list)
    conflicted: bool = False
    """Another writer changed a job during the cycle; its decisions were dropped."""
    settled: bool = False
    """Nothing changed since a cycle that changed no job: no cycle ran."""


@dataclass(frozen=True)
class _CycleInputs:
    tree: TopologyTree
    jobs: Mapping[JobId, JobView]
    policy: ClusterPolicy

    def same_as(self, other: _CycleInputs | None) -> bool:
        """Cheap when nothing changed: the store hands out the very same job objects then,
        and equality checks identity first."""
        return (
            other is not None
            and self.tree is other.tree
            and self.policy == other.policy
            and self.jobs == other.jobs
        )


class Controller:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        topology: TopologySpec,
        *,
        clock: Callable[[], float],
        commands: Callable[[JobSpec], Mapping[str, tuple[str, ...]]] | None = None,
        environment: Callable[[JobSpec], Mapping[str, str]] | None = None,
        metrics: ControlPlaneMetricsLike | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.topology = topology
        self.clock = clock
        self.commands = commands or pod_set_commands
        self.environment = environment
        self.metrics = metrics
        self.trees = TreeCache(topology)
        self.intake = Intake(store, clock)
        self._launched: dict[JobId, int] = {}
        """The attempt of each gang this controller started and has not stopped."""
        self._failed_nodes: set[str] | None = None
        """Nodes not ready as of the last step (None before the first step)."""
        self._settled: _CycleInputs | None = None
        """The inputs of the last cycle that changed no job (its decisions are all stored)."""

    # --- the loop -----------------------------------------------------------------------
    def step(self) -> StepReport:
        began = time.perf_counter()
        nodes = self.store.nodes()
        self._stop_work_on_failed_nodes(nodes)
        report = StepReport(events=self.executor.poll())
        if self._apply_events(report.events):
            nodes = self.store.nodes()  # the executor lost a node: it is marked failed now
        now = self.clock()
        jobs = self.store.jobs()
        self._stop_unbooked(jobs, report)
        policy = self.store.policy() or ClusterPolicy()
        tree = self.trees.tree(nodes)
        inputs = _CycleInputs(tree, jobs, policy)
        if not report.events and inputs.same_as(self._settled):
            # the cycle (which time does not enter) would decide what it decided last time,
            # and all of that is stored: a queue that waits costs a read, not a cycle
            report.settled = True
            if self.metrics is not None:
                self.metrics.observe_step(report, time.perf_counter() - began, jobs)
            return report
        result = schedule(Snapshot(now, tree, tuple(jobs.values()), policy))
        report.result = result
        after = apply_cycle(jobs, result, now=now, evict_at_once=True)
        changed = [view for job_id, view in after.items() if view != jobs[job_id]]
        if changed or result.diagnostics:
            try:
                self.store.save_jobs(changed, now=now, decisions=result)
            except ConcurrentUpdate:
                # a user changed a job while the cycle ran: nothing was written or
                # dispatched; the next step decides again on fresh state
                report.result = CycleResult()
                report.conflicted = True
                return report
        self._settled = None if changed else inputs
        self._dispatch(result, after, tree, report)
        if self.metrics is not None:
            holders = [view for view in after.values() if view.phase.holds_capacity]
            book = QuotaBook(
                policy, capacity_by_flavor(tree, INSTANCE_TYPE_LABEL), usage_by_team(holders)
            )
            self.metrics.observe_step(report, time.perf_counter() - began, after)
            self.metrics.observe_state(after, book)
        return report

    # --- reconciling the executor with the store ----------------------------------------
    def _stop_unbooked(self, jobs: Mapping[JobId, JobView], report: StepReport) -> None:
        """Stop the pods of every gang this controller started that the store no longer books
        at that attempt: cancelled, drained or requeued by a user (the API only writes the
        store), or ended while its pods linger."""
        for job_id, attempt in list(self._launched.items()):
            job = jobs.get(job_id)
            if job is None or not job.phase.holds_capacity or job.attempt != attempt:
                self.executor.cancel(job_id)
                del self._launched[job_id]
                report.cancelled.append(job_id)

    def _stop_work_on_failed_nodes(self, nodes: Iterable[NodeSpec]) -> None:
        """A node marked failed since the last step has its work stopped by the executor (which
        reports the gangs lost; the cycle requeues them). Nodes already failed when the
        controller started have no work here."""
        failed = {str(node.name) for node in nodes if not node.ready}
        if self._failed_nodes is None:
            self._failed_nodes = failed
            return
        newly = sorted(failed - self._failed_nodes)
        self._failed_nodes = failed
        if self.executor.capabilities.can_fail_nodes:
            for name in newly:
                self.executor.fail_node(name)

    def _dispatch(
        self,
        result: CycleResult,
        after: Mapping[JobId, JobView],
        tree: TopologyTree,
        report: StepReport,
    ) -> None:
        for preempt in result.preemptions:
            self.executor.cancel(preempt.victim)
            self._launched.pop(preempt.victim, None)
            report.cancelled.append(preempt.victim)
        for requeue in result.requeues:
            self.executor.cancel(requeue.job)
            self._launched.pop(requeue.job, None)
        for admit in result.admissions:
            job = after[admit.job]
            launch = self._launch(job, tree)
            self.executor.start(launch)
            self._launched[admit.job] = launch.attempt
            report.started.append(admit.job)

    def _launch(self, job: JobView, tree: TopologyTree) -> GangLaunch:
        if job.allocation is None:  # admitted jobs always carry one
            raise InvalidInputError(f"job {job.id} was admitted without an allocation")
        nodes = {
            name: node for name in job.allocation.nodes if (node := _node(tree, name)) is not None
        }
        labels = {
            name: {level: node.labels.get(level, "") for level in tree.spec.levels}
            for name, node in nodes.items()
        }
        return GangLaunch(
            job.spec,
            job.allocation,
            job.attempt,
            labels,
            commands=self.commands(job.spec),
            environment=pod_set_environment(job.spec)
            | (dict(self.environment(job.spec)) if self.environment else {}),
            node_allocatable={name: node.allocatable for name, node in nodes.items()},
        )

    # --- executor outcomes --------------------------------------------------------------
    def _apply_events(self, events: Iterable[ExecutorEvent]) -> bool:
        """Store what the events say; whether a node was marked failed."""
        marked = False
        for event in events:
            if event.kind is ExecutorEventKind.NODE_LOST and event.job is None:
                if event.node is not None:
                    self.intake.mark_node(event.node, ready=False, actor=SYSTEM)
                    marked = True
                    if self._failed_nodes is not None:
                        self._failed_nodes.add(event.node)  # its work has already stopped
                continue
            if event.job is None:
                continue
            launched = self._launched.get(event.job)
            if event.kind in _GANG_ENDED and event.attempt in (0, launched):  # 0: not said
                self._launched.pop(event.job, None)  # its pods are gone: nothing to stop
            job = self.store.job(event.job)
            moved = _moved_by(job, event)
            if moved is not None:
                self.store.save_jobs([moved], now=event.at_s)
        return marked

    def recover(self) -> list[JobId]:
        """After a restart: jobs the store says hold capacity but no executor runs go back to
        the queue (their processes did not survive). Returns their ids."""
        now = self.clock()
        requeued = []
        for job in self.store.jobs().values():
            if job.phase.holds_capacity:
                moved = advance(
                    job,
                    JobPhase.PENDING,
                    now=now,
                    cause="the control plane restarted; the gang is requeued",
                )
                self.store.save_jobs([moved], now=now)
                requeued.append(job.id)
        return requeued


def pod_set_commands(spec: JobSpec) -> dict[str, tuple[str, ...]]:
    """Each pod set's command, as the job was submitted (none: the default workload)."""
    return {ps.name: ps.command for ps in spec.workload.pod_sets if ps.command}


def pod_set_environment(spec: JobSpec) -> dict[str, str]:
    """The variables the job's pod sets ask for, merged in pod-set order."""
    merged: dict[str, str] = {}
    for pod_set in spec.workload.pod_sets:
        merged.update(pod_set.environment)
    return merged


_GANG_ENDED = frozenset({ExecutorEventKind.EXITED, ExecutorEventKind.NODE_LOST})


def _moved_by(job: JobView, event: ExecutorEvent) -> JobView | None:
    """The job after an executor event, or None when the event is stale (another attempt)."""
    if event.attempt and event.attempt != job.attempt:
        return None
    at = event.at_s
    match event.kind:
        case ExecutorEventKind.STARTED if job.phase is JobPhase.ADMITTED:
            return advance(job, JobPhase.RUNNING, now=at, cause="started")
        case ExecutorEventKind.EXITED if job.phase.holds_capacity:
            if event.exit_code == 0:
                return advance(job, JobPhase.SUCCEEDED, now=at, cause="every pod exited 0")
            cause = f"a pod exited {event.exit_code}"
            if job.failures < job.spec.max_retry:
                retried = advance(
                    job,
                    JobPhase.PENDING,
                    now=at,
                    cause=f"{cause}; retry {job.failures + 1} of {job.spec.max_retry}",
                )
                return replace(retried, failures=job.failures + 1)
            return advance(job, JobPhase.FAILED, now=at, cause=cause)
        case ExecutorEventKind.NODE_LOST if job.phase.holds_capacity:
            return advance(
                job,
                JobPhase.PENDING,
                now=at,
                cause=f"node {event.node} was lost; the gang is requeued",
            )
    return None


def _node(tree: TopologyTree, name: str) -> NodeSpec | None:
    index = tree.node_index.get(NodeName(name))
    return tree.nodes[index] if index is not None else None
