"""The controller: read a snapshot, run the cycle, commit, dispatch, feed outcomes back.

One ``step`` is: bring the executor in line with what users wrote to the store (stop the pods
of gangs cancelled, drained or requeued since, stop the work of nodes newly marked failed —
the API never talks to the executor, see ``topoq.engine.intake``), apply what the executor
reported since the last step, run one scheduling cycle on what the store holds, commit the
moves and decisions in one transaction, then tell the executor to cancel victims and start
admitted gangs. Commit comes before dispatch: after a crash the store never claims less than
what may be running, and ``recover`` reconciles. A cycle that raced a user's change commits
nothing (``ConcurrentUpdate``) and the next step decides again.

No single fault of the executor wedges the loop: a gang it cannot start fails alone
(START_FAILED, retried per ``max_retry``, its capacity freed) while the other admissions of
the cycle start; a failed stop is tried again at the next step; a failed poll costs nothing
(the executor hands its events out at the next one). Executor events are applied one by one,
each as a read-modify-write redone on fresh state when it raced a user's change, and leave the
controller's queue only once stored or found stale: none is lost when a step fails.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from topoq.core.cycle import Snapshot, schedule
from topoq.core.fair_share import (
    TeamUsage,
    held_fractions,
    kept_half_life_s,
    recheck_due,
    shares_of,
    usage_at,
)
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.quota import QuotaBook
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import CycleResult
from topoq.domain.errors import TopoqError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.engine.intake import SYSTEM, Intake, redo_on_conflict
from topoq.engine.launches import Commands, Environment, gang_launch, pod_set_commands
from topoq.engine.outcomes import GANG_ENDED, error_message, moved_by
from topoq.engine.ports import (
    ConcurrentUpdate,
    Executor,
    ExecutorEvent,
    ExecutorEventKind,
    Store,
    StoreUnavailable,
    UnknownJob,
)
from topoq.engine.tree_cache import TreeCache

log = logging.getLogger(__name__)

MAX_EVENT_STEPS = 10
"""Steps in a row in which an event failed to be stored (with the store otherwise working: a
step reads the nodes first) before it is dropped as one that never can be."""
USAGE_SAVE_INTERVAL_S = 60.0
"""The longest the teams' fair-share usage stays unsaved (it is also saved when a step changed
jobs, and when the server stops): a crash forgets at most this much of it."""


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
    """The executor events stored (or found stale and dropped) in this step."""
    result: CycleResult = field(default_factory=CycleResult)
    started: list[JobId] = field(default_factory=list)
    cancelled: list[JobId] = field(default_factory=list)
    start_failed: list[JobId] = field(default_factory=list)
    """Admitted gangs the executor could not start (each failed alone: START_FAILED)."""
    executor_errors: list[str] = field(default_factory=list)
    """What the executor failed to do in this step, one line each (also logged)."""
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
        commands: Commands | None = None,
        environment: Environment | None = None,
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
        self._unapplied: deque[ExecutorEvent] = deque()
        """Executor events polled (or made, START_FAILED) and not yet stored, oldest first."""
        self._event_failures = 0
        """In how many steps in a row storing the oldest unapplied event failed."""
        self._settled_at = 0.0
        """When the settled cycle ran (usage history moves on with time alone)."""
        self._settled_waiting = False
        """Whether jobs waited after the settled cycle (only then can time change a decision)."""
        self._usage: dict[TeamName, TeamUsage] | None = None
        """Each team's decayed fair-share usage as of the last step (read at the first)."""
        self._held: dict[TeamName, float] = {}
        """Each team's borrowed fraction as the last step left the books: what it holds until
        the next step accounts for the time in between."""
        self._accounted_at: float | None = None
        self._usage_saved: tuple[float, dict[TeamName, TeamUsage]] | None = None

    # --- the loop -----------------------------------------------------------------------
    def step(self) -> StepReport:
        began = time.perf_counter()
        report = StepReport()
        nodes = self.store.nodes()
        self._stop_work_on_failed_nodes(nodes, report)
        self._unapplied.extend(self._poll(report))
        if self._apply_events(report):
            nodes = self.store.nodes()  # the executor lost a node: it is marked failed now
        now = self.clock()
        jobs = self.store.jobs()
        self._stop_unbooked(jobs, report)
        policy = self.store.policy() or ClusterPolicy()
        tree = self.trees.tree(nodes)
        inputs = _CycleInputs(tree, jobs, policy)
        usage = self._usage_now(now, policy)
        if (
            not report.events
            and inputs.same_as(self._settled)
            and not (self._settled_waiting and recheck_due(policy, self._settled_at, now))
        ):
            # the cycle (which time enters only through usage history, rechecked now and
            # then) would decide what it decided last time, and all of that is stored: a
            # queue that waits costs a read, not a cycle
            report.settled = True
            self._save_usage(now, changed=False)
            if self.metrics is not None:
                self.metrics.observe_step(report, time.perf_counter() - began, jobs)
            return report
        snapshot = Snapshot(
            now, tree, tuple(jobs.values()), policy, fair_share_usage=shares_of(usage)
        )
        result = schedule(snapshot)
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
        self._settled_at = now
        self._settled_waiting = bool(result.diagnostics)
        self._dispatch(result, after, tree, report)
        self._apply_events(report)  # the start failures of this dispatch
        self._held = held_fractions(policy, tree, after.values())
        if kept_half_life_s(policy) > 0:
            for team in self._held:  # known from now on: what they hold counts from now
                usage.setdefault(team, TeamUsage(0.0, now))
        if self.metrics is not None:
            self._observe(report, time.perf_counter() - began, after, tree, policy)
        self._save_usage(now, changed=bool(changed))
        return report

    # --- fair-share usage history ---------------------------------------------------------
    def _usage_now(self, now: float, policy: ClusterPolicy) -> dict[TeamName, TeamUsage]:
        """The teams' usage brought forward to ``now``: what the last step left them holding,
        for the time since (at the first step, the stored usage only decays: after a restart
        nothing ran in between, ``recover`` requeues what the store said was running)."""
        if self._usage is None:
            self._usage = self.store.fair_share_usage()
            self._usage_saved = (now, dict(self._usage))
        since = now if self._accounted_at is None else self._accounted_at
        self._usage = usage_at(
            self._usage,
            self._held,
            since_s=since,
            now_s=now,
            half_life_s=kept_half_life_s(policy),
        )
        self._accounted_at = now
        return self._usage

    def _save_usage(self, now: float, *, changed: bool) -> None:
        """Save the usage when the step changed jobs or ``USAGE_SAVE_INTERVAL_S`` passed, and
        only when it differs from what was saved."""
        saved = self._usage_saved
        due = changed or saved is None or now - saved[0] >= USAGE_SAVE_INTERVAL_S
        if due and (saved is None or saved[1] != self._usage):
            self.save_fair_share_usage()

    def save_fair_share_usage(self) -> None:
        """Write the teams' usage as of the last step to the store (and when the server
        stops, so that a restart goes on from it)."""
        if self._usage is None or self._accounted_at is None:
            return
        self.store.save_fair_share_usage(self._usage)
        self._usage_saved = (self._accounted_at, dict(self._usage))

    def _observe(
        self,
        report: StepReport,
        duration_s: float,
        after: Mapping[JobId, JobView],
        tree: TopologyTree,
        policy: ClusterPolicy,
    ) -> None:
        if self.metrics is None:
            return
        holders = [view for view in after.values() if view.phase.holds_capacity]
        book = QuotaBook(
            policy, capacity_by_flavor(tree, INSTANCE_TYPE_LABEL), usage_by_team(holders)
        )
        self.metrics.observe_step(report, duration_s, after)
        self.metrics.observe_state(after, book)

    # --- talking to the executor: a failure of one call fails that call only ------------
    def _poll(self, report: StepReport) -> list[ExecutorEvent]:
        try:
            return self.executor.poll()
        except Exception as error:  # any executor failure: the step goes on
            self._executor_failed("poll", error, report)
            return []  # what it had not handed out yet, it hands out at the next poll

    def _stop(self, job_id: JobId, report: StepReport) -> bool:
        """Tell the executor to stop the job's pods; whether it did."""
        try:
            self.executor.cancel(job_id)
        except Exception as error:  # any executor failure: retried next step
            self._executor_failed(f"cancel {job_id}", error, report)
            return False
        return True

    def _start(self, admitted: JobView, tree: TopologyTree, report: StepReport) -> bool:
        """Start the admitted gang; when that fails (building its launch or the executor's
        start), queue its START_FAILED (applied before the step ends) and stop whatever of it
        may have started. Whether it started."""
        job = admitted.id
        try:
            self.executor.start(gang_launch(admitted, tree, self.commands, self.environment))
        except Exception as error:  # any failure fails this gang only
            message = error_message(error)
            self._executor_failed(f"start {job}", error, report)
            if not self._stop(job, report):
                self._launched[job] = admitted.attempt  # ``_stop_unbooked`` tries again
            failed = ExecutorEvent(
                ExecutorEventKind.START_FAILED,
                self.clock(),
                job=job,
                attempt=admitted.attempt,
                message=message,
            )
            self._unapplied.append(failed)
            report.start_failed.append(job)
            return False
        return True

    def _executor_failed(self, call: str, error: Exception, report: StepReport) -> None:
        message = f"the executor failed to {call}: {error_message(error)}"
        log.warning(message)
        report.executor_errors.append(message)

    # --- reconciling the executor with the store ----------------------------------------
    def _stop_unbooked(self, jobs: Mapping[JobId, JobView], report: StepReport) -> None:
        """Stop the pods of every gang this controller started that the store no longer books
        at that attempt: cancelled, drained or requeued by a user (the API only writes the
        store), or ended while its pods linger. A stop that fails is tried again next step."""
        for job_id, attempt in list(self._launched.items()):
            job = jobs.get(job_id)
            booked = job is not None and job.phase.holds_capacity and job.attempt == attempt
            if not booked and self._stop(job_id, report):
                del self._launched[job_id]
                report.cancelled.append(job_id)

    def _stop_work_on_failed_nodes(self, nodes: Iterable[NodeSpec], report: StepReport) -> None:
        """A node marked failed since the last step has its work stopped by the executor (which
        reports the gangs lost; the cycle requeues them). Nodes already failed when the
        controller started have no work here. A node the executor failed to stop is tried
        again at the next step."""
        failed = {str(node.name) for node in nodes if not node.ready}
        if self._failed_nodes is None:
            self._failed_nodes = failed
            return
        newly = sorted(failed - self._failed_nodes)
        self._failed_nodes = failed
        if not self.executor.capabilities.can_fail_nodes:
            return
        for name in newly:
            try:
                self.executor.fail_node(name)
            except Exception as error:  # any executor failure: retried next step
                self._executor_failed(f"stop the work on node {name}", error, report)
                self._failed_nodes.discard(name)

    def _dispatch(
        self,
        result: CycleResult,
        after: Mapping[JobId, JobView],
        tree: TopologyTree,
        report: StepReport,
    ) -> None:
        """Stop victims and requeued gangs, then start every admitted gang. A stop that fails
        leaves the gang known as launched, so that ``_stop_unbooked`` tries again; a start
        that fails fails that gang alone."""
        for preempt in result.preemptions:
            if self._stop(preempt.victim, report):
                self._launched.pop(preempt.victim, None)
                report.cancelled.append(preempt.victim)
        for requeue in result.requeues:
            if self._stop(requeue.job, report):
                self._launched.pop(requeue.job, None)
        for admit in result.admissions:
            admitted = after[admit.job]
            if self._start(admitted, tree, report):
                self._launched[admit.job] = admitted.attempt
                report.started.append(admit.job)

    # --- executor outcomes --------------------------------------------------------------
    def _apply_events(self, report: StepReport) -> bool:
        """Store what the unapplied events say, oldest first, each on its own; whether a node
        was marked failed. An event leaves the queue only once it is stored (or found stale):
        when one job's event raced other writers ``MAX_ATTEMPTS`` times, it and the ones
        after it wait for the next step (in order, so that a gang's STARTED is never stored
        after its EXITED); when the database is away (``StoreUnavailable``) the error ends the
        step and the events wait, however long that lasts. An event the domain refuses (a lost
        node no longer in the inventory) is dropped at once, logged; one that fails otherwise
        in ``MAX_EVENT_STEPS`` steps in a row can never be stored and is dropped, logged,
        rather than hold back every later one."""
        marked = False
        while self._unapplied:
            event = self._unapplied[0]
            try:
                marked |= self._apply_event(event)
            except ConcurrentUpdate:
                break
            except StoreUnavailable:
                raise  # the database is away: nothing is wrong with the event
            except TopoqError as error:
                self._drop_event(event, error, report)
            except Exception as error:
                self._event_failures += 1
                if self._event_failures < MAX_EVENT_STEPS:
                    raise
                self._drop_event(event, error, report)
            self._event_failures = 0
            self._unapplied.popleft()
            report.events.append(event)
        return marked

    def _drop_event(self, event: ExecutorEvent, error: Exception, report: StepReport) -> None:
        message = f"dropped an executor event that cannot be stored: {event}"
        log.error("%s (%s)", message, error_message(error))
        report.executor_errors.append(message)

    def _apply_event(self, event: ExecutorEvent) -> bool:
        """Store one event as a read-modify-write redone on fresh state when it raced another
        writer (a user's cancel, say); whether it marked a node failed."""
        if event.job is None:
            if event.kind is not ExecutorEventKind.NODE_LOST or event.node is None:
                return False
            self.intake.mark_node(event.node, ready=False, actor=SYSTEM)
            if self._failed_nodes is not None:
                self._failed_nodes.add(event.node)  # its work has already stopped
            return True
        launched = self._launched.get(event.job)
        if event.kind in GANG_ENDED and event.attempt in (0, launched):  # 0: not said
            self._launched.pop(event.job, None)  # its pods are gone: nothing to stop
        self._change_job(event.job, lambda job: moved_by(job, event), now=event.at_s)
        return False

    def _change_job(
        self, job_id: JobId, change: Callable[[JobView], JobView | None], *, now: float
    ) -> JobView | None:
        """Read the job, ``change`` it and save the result (None: nothing to change, e.g. the
        job is gone or the change no longer applies), redone when another writer came in
        between."""

        def attempt() -> JobView | None:
            try:
                job = self.store.job(job_id)
            except UnknownJob:
                return None
            moved = change(job)
            if moved is not None:
                self.store.save_jobs([moved], now=now)
            return moved

        return redo_on_conflict(attempt)

    def recover(self) -> list[JobId]:
        """After a restart: jobs the store says hold capacity but no executor runs go back to
        the queue (their processes did not survive). Returns their ids."""
        now = self.clock()
        cause = "the control plane restarted; the gang is requeued"

        def requeued(job: JobView) -> JobView | None:
            if not job.phase.holds_capacity:
                return None  # it moved meanwhile (a user's cancel)
            return advance(job, JobPhase.PENDING, now=now, cause=cause)

        ids = list(self.store.holding_jobs())
        return [job_id for job_id in ids if self._change_job(job_id, requeued, now=now)]
