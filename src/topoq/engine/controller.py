"""The controller: read a snapshot, run the cycle, commit, dispatch, feed outcomes back.

One ``step`` is: bring the executor in line with what users wrote to the store (stop the pods
of gangs cancelled, drained or requeued since, stop the work of nodes newly marked failed —
the API never talks to the executor, see ``topoq.engine.intake``), apply what the executor
reported since the last step, run one scheduling cycle on what the store holds, commit the
moves and decisions in one transaction, then tell the executor to cancel victims and start
admitted gangs. Commit comes before dispatch: after a crash the store never claims less than
what may be running, and ``recover`` reconciles.

Preemption waits for the victims to stop: a victim is PREEMPTING (it keeps its nodes) while
the executor stops it (``Executor.stop`` with the policy's ``preemption_grace_s``); STOPPED
requeues it and frees the room its preemptor is then admitted into. A victim that has not
stopped ``GRACE_MARGIN_S`` after its grace period is killed (``Executor.cancel``) and requeued.
A cycle that raced a user's change commits nothing (``ConcurrentUpdate``) and the next step
decides again.

No single fault of the executor wedges the loop: a gang it cannot start fails alone
(START_FAILED, retried per ``max_retry``, its capacity freed) while the other admissions of
the cycle start; a failed stop is tried again at the next step; a failed poll costs nothing
(the executor hands its events out at the next one). Executor events are applied one by one,
each as a read-modify-write redone on fresh state when it raced a user's change, and leave the
controller's queue only once stored or found stale: none is lost when a step fails.
"""

from __future__ import annotations

import logging
import operator
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Protocol

from topoq.core.cycle import (
    JobsByPhase,
    Parking,
    PhaseIndex,
    PlacementMode,
    Snapshot,
    schedule_with_parking,
)
from topoq.core.fair_share import (
    TeamUsage,
    kept_half_life_s,
    recheck_due,
    shares_of,
    usage_at,
)
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.inventory_merge import merged_inventory
from topoq.core.lifecycle import advance, cycle_moves
from topoq.core.quota import QuotaBook
from topoq.core.starvation import next_time_rule_change
from topoq.core.time_limits import failed_by_limit, overdue, running_deadline
from topoq.core.tree import TopologyTree
from topoq.domain.decisions import CycleResult
from topoq.domain.errors import TopoqError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeName, NodeSpec
from topoq.domain.topology import TopologySpec
from topoq.engine.event_log import cycle_events, inventory_changed, moved, write_event, write_events
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
from topoq.engine.team_holdings import TeamHoldings
from topoq.engine.tree_cache import TreeCache
from topoq.engine.upstream import upstream_phases

log = logging.getLogger(__name__)

GRACE_MARGIN_S = 5.0
"""How long past a victim's grace period the controller waits for STOPPED before it has the
pods killed and requeues the victim itself."""

MAX_EVENT_STEPS = 10
"""Steps in a row in which an event failed to be stored (with the store otherwise working: a
step reads the nodes first) before it is dropped as one that never can be."""
HOLDING_PHASES = tuple(phase for phase in JobPhase if phase.holds_capacity)
"""A tuple, not a set: membership by identity, without hashing an enum member in Python."""
USAGE_SAVE_INTERVAL_S = 60.0
"""The longest the teams' fair-share usage stays unsaved (it is also saved when a step changed
jobs, and when the server stops): a crash forgets at most this much of it."""


class ControlPlaneMetricsLike(Protocol):
    """What the controller reports to (``topoq.engine.metrics.ControlPlaneMetrics``)."""

    def observe_step(
        self, report: StepReport, duration_s: float, jobs: Mapping[JobId, JobView]
    ) -> None: ...

    def observe_state(self, jobs: Mapping[JobId, JobView], book: QuotaBook) -> None: ...


class StepDecision(StrEnum):
    """How a controller step reached its decisions (``topoq_steps_total``'s label)."""

    CYCLE = "cycle"
    """A scheduling cycle ran."""
    ARRIVALS = "arrivals"
    """Only jobs that change nothing had arrived: each waits as its class failed in the last
    cycle, without a cycle (``core.cycle.arrivals``)."""
    UNCHANGED = "unchanged"
    """Nothing that decides anything changed: the last decisions stand."""
    NOTHING_WAITS = "nothing_waits"
    """No job waits and no node failed since the last cycle: a cycle could decide nothing
    (it admits, preempts, cancels and explains only waiting jobs, and requeues only the gangs
    of a node that failed), so none ran. Jobs ending on a cluster with an empty queue."""


@dataclass
class StepReport:
    """What one step did, for logs and metrics."""

    events: list[ExecutorEvent] = field(default_factory=list)
    """The executor events stored (or found stale and dropped) in this step."""
    result: CycleResult = field(default_factory=CycleResult)
    started: list[JobId] = field(default_factory=list)
    cancelled: list[JobId] = field(default_factory=list)
    stopping: list[JobId] = field(default_factory=list)
    """Victims the executor was asked to stop (STOPPED follows)."""
    killed: list[JobId] = field(default_factory=list)
    """Victims that had not stopped past their grace period: killed and requeued."""
    start_failed: list[JobId] = field(default_factory=list)
    """Admitted gangs the executor could not start (each failed alone: START_FAILED)."""
    timed_out: list[JobId] = field(default_factory=list)
    """Running jobs past their time limit, failed (TIME_LIMIT_REACHED) and stopped."""
    executor_errors: list[str] = field(default_factory=list)
    """What the executor failed to do in this step, one line each (also logged)."""
    conflicted: bool = False
    """Another writer changed a job during the cycle; its decisions were dropped."""
    settled: bool = False
    """Nothing changed since a cycle that changed no job: no cycle ran."""
    decided_by: StepDecision = StepDecision.UNCHANGED
    """How the step's decisions were reached (``StepDecision``)."""
    settles_next: bool = False
    """A step at the same instant, with no new report of the executor's and nobody else
    writing, would take the settled shortcut: this step's cycle moved no job (what it saw
    of the executor's reports, it saw before the cycle) and nothing was stored after it. A
    shell that steps until nothing changes (the simulator) need not take that step."""


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


@dataclass(frozen=True)
class _JobsAfter:
    """The unfinished jobs after a stored cycle's moves, and those among them that hold
    capacity (what most of the step's bookkeeping looks at)."""

    jobs: Mapping[JobId, JobView]
    holders: Mapping[JobId, JobView]


@dataclass
class _ViewsSeen:
    """What the controller worked out of the views it read, kept while a job's view is the
    one read: a view never changes, so the same view is not worked out again each step."""

    booked: dict[JobId, tuple[JobView, int]] = field(default_factory=dict)
    """The view of each gang it started last found booked at that attempt
    (``Controller._stop_unbooked``; counting a view's attempt walks its history)."""
    deadlines: dict[JobId, tuple[JobView, float | None]] = field(default_factory=dict)
    """Each holder's view and when it reaches its time limit under ``deadlines_under``."""

    deadlines_under: ClusterPolicy | None = None
    next_deadline: float | None = None
    """The first of them after the last step's instant (None: none)."""
    not_ready: tuple[tuple[NodeSpec, ...], frozenset[str]] = ((), frozenset())
    """The node specs last looked at for failed nodes, and the names of those not ready."""


def _time_rules_change(
    policy: ClusterPolicy,
    limits: float | None,
    after: _JobsAfter,
    parking: Parking | None,
    now: float,
) -> float | None:
    """When a time rule next changes what a cycle that moved no job decided: a running job
    reaching its time limit (``limits``: the first after ``now`` among the holders), or a
    ready job passing the starvation guard — told by the lineup the cycle kept
    (``Parking.guard_passes_next``), else found in a pass over every job (pending jobs enter
    the time rules only through the guard)."""
    if policy.starvation_guard_s <= 0:
        return limits
    try:
        guard = parking.guard_passes_next(now) if parking is not None else None
    except LookupError:  # no lineup kept
        parking = None
    if parking is None:
        return next_time_rule_change(after.jobs.values(), now, policy)
    return min((at for at in (limits, guard) if at is not None), default=None)


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
        placement: PlacementMode = PlacementMode.TOPOQ,
    ) -> None:
        self.store = store
        self.executor = executor
        self.topology = topology
        self.clock = clock
        self.placement = placement
        """How its cycles place gangs: topoq's way on a server; a baseline's when the
        simulator compares placement modes through the controller (ADR 0014)."""
        self.commands = commands or pod_set_commands
        self.environment = environment
        self.metrics = metrics
        self.trees = TreeCache(topology)
        self.intake = Intake(store, clock)
        self._launched: dict[JobId, int] = {}
        """The attempt of each gang this controller started and has not stopped."""
        self._seen = _ViewsSeen()
        self._stopping: set[JobId] = set()
        """Victims the executor was asked to stop (``Executor.stop``) and not yet stopped."""
        self._failed_nodes: set[str] | None = None
        """Nodes not ready as of the last step (None before the first step)."""
        self._recovering: set[str] = set()
        """Nodes a user marked healthy whose ``recover_node`` failed: tried again next step."""
        self._settled: _CycleInputs | None = None
        """The inputs of the last cycle that changed no job (its decisions are all stored)."""
        self._settled_until: float | None = None
        """When a time-based rule (a time limit, the starvation guard) next changes what a
        cycle on the settled inputs decides (None: never)."""
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
        self._accounted_at: float | None = None
        self._usage_saved: tuple[float, dict[TeamName, TeamUsage]] | None = None
        self._reported_nodes: dict[NodeName, NodeSpec] = {}
        """The executor's last report of the cluster's nodes (``_take_inventory``)."""
        self._holdings = TeamHoldings()
        """What the teams' running jobs hold, kept from step to step by the views that changed:
        the borrowed fractions fair-share usage accrues at are worked out again only when a
        team's usage moved, and only when usage is kept (``TeamHoldings.left_by_cycle``)."""
        self._phases = PhaseIndex()
        """The unfinished jobs of the last read, sorted out by phase: each step's read brings
        it up to date by the views that changed (``PhaseIndex.synced``)."""
        self._cycled_on: TopologyTree | None = None
        """The tree the last cycle whose decisions were stored ran on."""
        self._parking: Parking | None = None
        """What the last committed cycle parked, handed to the next cycle (None at the start
        and after a step that failed or raced another writer: the next cycle starts afresh)."""

    # --- the loop -----------------------------------------------------------------------
    def step(self) -> StepReport:
        began = time.perf_counter()
        report = StepReport()
        nodes = self.store.nodes()
        self._return_recovered_nodes(nodes, report)  # first: the cluster's report shows them
        if self._take_inventory(nodes, report):
            nodes = self.store.nodes()
        self._stop_work_on_failed_nodes(nodes, report)
        self._unapplied.extend(self._poll(report))
        if self._apply_events(report):
            nodes = self.store.nodes()  # the executor lost a node: it is marked failed now
        now = self.clock()
        jobs = self.store.jobs()
        policy = self.store.policy() or ClusterPolicy()
        jobs, sorted_out = self._reconcile_jobs(jobs, now, policy, report)
        holders = sorted_out.holding
        tree = self.trees.tree(nodes)
        inputs = _CycleInputs(tree, jobs, policy)
        usage = self._usage_now(now, policy)
        due = self._settled_until is not None and now >= self._settled_until
        if (
            not report.events
            and not due
            and inputs.same_as(self._settled)
            and not (self._settled_waiting and recheck_due(policy, self._settled_at, now))
        ):
            # the cycle would decide what it decided last time (time enters it only through
            # time limits, the starvation guard — none of them is due — and usage history,
            # rechecked now and then), and all of that is stored: a queue that waits costs a
            # read, not a cycle
            report.settled = True
            self._save_usage(now, changed=False)
            if self.metrics is not None:
                self.metrics.observe_step(report, time.perf_counter() - began, jobs)
            return report
        # finished jobs depended on
        upstream = upstream_phases(self.store, jobs.values(), sorted_out.dependents)
        snapshot = Snapshot(
            now,
            tree,
            tuple(jobs.values()),
            policy,
            upstream_phases=upstream,
            fair_share_usage=shares_of(usage),
            placement=self.placement,
            by_phase=sorted_out,  # the very jobs above, sorted out once for the whole step
        )
        result, parking = self._decide(snapshot, report)
        moves = cycle_moves(jobs, result, now=now)
        changed = list(moves.values())
        if changed or result.diagnostics:
            try:
                self.store.save_jobs(changed, now=now, decisions=result)
            except ConcurrentUpdate:
                # a user changed a job while the cycle ran: nothing was written or
                # dispatched; the next step decides again on fresh state
                report.result = CycleResult()
                report.conflicted = True
                return report
        self._parking = parking
        if report.decided_by is not StepDecision.NOTHING_WAITS:
            # its decisions are stored (a cycle that raced a user's change stored none, and
            # a lost gang it would requeue is looked for again)
            self._cycled_on = tree
        write_events(log, cycle_events(result, jobs, moves, policy))  # as stored
        after = _JobsAfter({**jobs, **moves}, holders_after(holders, moves))
        self._remember_cycle(inputs, result, after, changed=bool(changed), now=now)
        self._carry_out(result, after, tree, policy, report, now)
        self._holdings.left_by_cycle(after.holders, policy, tree)
        if kept_half_life_s(policy) > 0:
            for team in self._holdings.held_fractions():  # known from now on: what they hold
                usage.setdefault(team, TeamUsage(0.0, now))
        if self.metrics is not None:
            self._observe(report, time.perf_counter() - began, after, tree, policy)
        self._save_usage(now, changed=bool(changed))
        return report

    def _carry_out(
        self,
        result: CycleResult,
        after: _JobsAfter,
        tree: TopologyTree,
        policy: ClusterPolicy,
        report: StepReport,
        now: float,
    ) -> None:
        """Dispatch a stored cycle's decisions and store the start failures of that dispatch;
        say whether the next step at ``now`` would settle (``StepReport.settles_next``)."""
        seen = len(report.events)
        self._dispatch(result, after.jobs, tree, report, grace_s=policy.preemption_grace_s)
        self._apply_events(report)  # the start failures of this dispatch
        report.settles_next = (
            self._settled is not None
            and len(report.events) == seen
            and not self._unapplied
            and not report.executor_errors
            and (self._settled_until is None or self._settled_until > now)
        )

    def _decide(self, snapshot: Snapshot, report: StepReport) -> tuple[CycleResult, Parking | None]:
        """The cycle's decisions on ``snapshot`` (in ``report`` too, with how they were
        reached), and what it parked; the controller keeps that again once it is stored."""
        before, self._parking = self._parking, None
        jobs = snapshot.by_phase
        if (
            jobs is not None
            and not (jobs.ready or jobs.held or jobs.dependents)
            and snapshot.tree is self._cycled_on
        ):
            # every holder was found whole on this very tree by the last cycle, or admitted
            # onto it; the parking goes to the next cycle as it was (the simulator's old shell
            # skipped such cycles alike)
            report.decided_by = StepDecision.NOTHING_WAITS
            return CycleResult(), before
        result, parking = schedule_with_parking(snapshot, before)
        report.result = result
        if parking is not before:
            report.decided_by = StepDecision.CYCLE if parking.cycled else StepDecision.ARRIVALS
        return result, parking

    def _reconcile_jobs(
        self, jobs: dict[JobId, JobView], now: float, policy: ClusterPolicy, report: StepReport
    ) -> tuple[dict[JobId, JobView], JobsByPhase]:
        """Bring the store and the executor in line before the cycle: fail the jobs past
        their time limit, stop the pods of gangs no longer booked, stop or kill victims. The
        unfinished jobs, read again when this changed any, sorted out by phase (in one pass:
        the holders are what this looks at, and the cycle takes the rest as they are)."""
        sorted_out = self._phases.synced(jobs)
        if self._fail_overdue(sorted_out.holding, now, policy, report):
            jobs = self.store.jobs()
            sorted_out = self._phases.synced(jobs)
        self._stop_unbooked(sorted_out.holding, report)
        if self._stop_victims(sorted_out.preempting, policy.preemption_grace_s, now, report):
            jobs = self.store.jobs()  # a victim past its grace period was requeued
            sorted_out = self._phases.synced(jobs)
        return jobs, sorted_out

    def _remember_cycle(
        self,
        inputs: _CycleInputs,
        result: CycleResult,
        after: _JobsAfter,
        *,
        changed: bool,
        now: float,
    ) -> None:
        """What the settled shortcut of later steps needs of a stored cycle: its inputs when
        it changed no job, and when a time rule next changes what it decided. A cycle that
        moved jobs leaves nothing to settle on (the next step's inputs differ), so the time
        rules are not walked for it."""
        if changed:
            self._settled = None
            return
        self._settled = inputs
        # the holders' first deadline after now, found when the step looked for those past it
        # (the holders it read: the cycle moved none, and a job failed at its limit had its
        # deadline at or before now)
        limits = self._seen.next_deadline
        self._settled_until = _time_rules_change(inputs.policy, limits, after, self._parking, now)
        self._settled_at = now
        self._settled_waiting = bool(result.diagnostics)

    def time_rule_due(self) -> float | None:
        """When a time-based rule next changes what the last stored cycle decided (None:
        never), for a shell that steps only when something is due (the simulator on its
        virtual clock). Known once a step moved no job; before that, ``LookupError``."""
        if self._settled is None:
            raise LookupError("the last step moved jobs: step again until one moves none")
        return self._settled_until

    # --- fair-share usage history ---------------------------------------------------------
    def _usage_now(self, now: float, policy: ClusterPolicy) -> dict[TeamName, TeamUsage]:
        """The teams' usage brought forward to ``now``: what the last step left them holding,
        for the time since (at the first step, the stored usage only decays: after a restart
        nothing ran in between, ``recover`` requeues what the store said was running)."""
        if self._usage is None:
            self._usage = self.store.fair_share_usage()
            self._usage_saved = (now, dict(self._usage))
        since = now if self._accounted_at is None else self._accounted_at
        kept = kept_half_life_s(policy)
        self._usage = usage_at(
            self._usage,
            self._holdings.held_fractions() if kept > 0 else {},
            since_s=since,
            now_s=now,
            half_life_s=kept,
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
        after: _JobsAfter,
        tree: TopologyTree,
        policy: ClusterPolicy,
    ) -> None:
        if self.metrics is None:
            return
        usage = usage_by_team(after.holders.values())
        book = QuotaBook(policy, capacity_by_flavor(tree, INSTANCE_TYPE_LABEL), usage)
        self.metrics.observe_step(report, duration_s, after.jobs)
        self.metrics.observe_state(after.jobs, book)

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

    def _ask_to_stop(self, victim: JobId, grace_s: float, report: StepReport) -> None:
        """Tell the executor to begin stopping a victim (it returns at once; STOPPED follows).
        A call that fails is tried again at the next step (``_stop_victims``)."""
        try:
            self.executor.stop(victim, grace_s)
        except Exception as error:  # any executor failure: retried next step
            self._executor_failed(f"stop {victim}", error, report)
            return
        self._stopping.add(victim)
        report.stopping.append(victim)

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
    def _fail_overdue(
        self,
        holders: Mapping[JobId, JobView],
        now: float,
        policy: ClusterPolicy,
        report: StepReport,
    ) -> bool:
        """Fail every running job past its time limit (TIME_LIMIT_REACHED, no retry); the
        store first, so that ``_stop_unbooked`` then stops its pods (and tries again while
        that fails). Whether any job failed. ``holders``: the jobs that hold capacity (only a
        running job has a time limit that runs)."""
        for reached in overdue(self._past_deadline(holders, now, policy), now, policy):
            # read again: it may have moved meanwhile (ended, cancelled, requeued)
            moved = self._change_job(
                reached.job, lambda job: failed_by_limit(job, now, policy), now=now
            )
            if moved is not None:
                report.timed_out.append(reached.job)
        return bool(report.timed_out)

    def _past_deadline(
        self, holders: Mapping[JobId, JobView], now: float, policy: ClusterPolicy
    ) -> list[JobView]:
        """The holders whose time limit is reached at ``now``, each view's deadline worked out
        once (a view never changes; the memo is dropped when the policy changes); the first
        deadline after ``now`` is kept for the settled shortcut (``_remember_cycle``)."""
        seen_views = self._seen
        memo = seen_views.deadlines
        if policy is not seen_views.deadlines_under and policy != seen_views.deadlines_under:
            memo = seen_views.deadlines = {}
            seen_views.deadlines_under = policy
        reached = []
        next_deadline: float | None = None
        for job_id, job in holders.items():
            seen = memo.get(job_id)
            if seen is None or seen[0] is not job:
                seen = memo[job_id] = (job, running_deadline(policy, job))
            deadline = seen[1]
            if deadline is None:
                continue
            if deadline <= now:
                reached.append(job)
            elif next_deadline is None or deadline < next_deadline:
                next_deadline = deadline
        seen_views.next_deadline = next_deadline
        if len(memo) > 2 * len(holders):
            seen_views.deadlines = {job: memo[job] for job in holders if job in memo}
        return reached

    def _stop_unbooked(self, holders: Mapping[JobId, JobView], report: StepReport) -> None:
        """Stop the pods of every gang this controller started that the store no longer books
        at that attempt (``holders``: the jobs that hold capacity): cancelled, drained or
        requeued by a user (the API only writes the store), or ended while its pods linger. A
        stop that fails is tried again next step."""
        unbooked = []
        known = self._seen.booked
        for job_id, attempt in self._launched.items():
            job = holders.get(job_id)
            if job is None:
                unbooked.append(job_id)
                continue
            seen = known.get(job_id)
            if seen is not None and seen[0] is job and seen[1] == attempt:
                continue  # this very view was found booked at this attempt
            if job.attempt != attempt:  # (counting its attempt walks its history)
                unbooked.append(job_id)
            else:
                known[job_id] = (job, attempt)
        if len(known) > 2 * len(self._launched):
            self._seen.booked = {job: known[job] for job in self._launched if job in known}
        if not unbooked:
            return
        try:
            self.executor.cancel_all(unbooked)  # their stops overlap
        except Exception as error:  # any executor failure: retried next step
            self._executor_failed(f"cancel {', '.join(unbooked)}", error, report)
            return
        for job_id in unbooked:
            del self._launched[job_id]
            self._stopping.discard(job_id)
            report.cancelled.append(job_id)

    def _stop_victims(
        self, preempting: Iterable[JobView], grace_s: float, now: float, report: StepReport
    ) -> bool:
        """Every PREEMPTING job (``preempting``, as the step's read sorted them out) is being
        stopped: ask the executor again where asking failed, and requeue a victim still there
        ``GRACE_MARGIN_S`` past its grace period once the executor killed its pods (``cancel``
        returns when they are gone; one that fails is tried again at the next step). Whether
        one was requeued. This runs every step, settled or not, so a deadline is never slept
        past."""
        requeued = False
        victims = tuple(preempting)
        self._stopping &= {job.id for job in victims}
        for job in victims:
            since = job.preempting_since
            if since is None:
                continue
            if now < since + grace_s + GRACE_MARGIN_S:
                if job.id not in self._stopping:
                    self._ask_to_stop(job.id, grace_s, report)
            elif self._stop(job.id, report):  # past the deadline, asked or not
                cause = (
                    f"requeued after preemption: its pods had not stopped {grace_s:g} s after "
                    "SIGTERM; they were killed"
                )
                if self._change_job(job.id, partial(_killed, now=now, cause=cause), now=now):
                    requeued = True
                    report.killed.append(job.id)
                self._launched.pop(job.id, None)
                self._stopping.discard(job.id)
        return requeued

    def _stop_work_on_failed_nodes(self, nodes: Sequence[NodeSpec], report: StepReport) -> None:
        """A node marked failed since the last step has its work stopped by the executor (which
        reports the gangs lost; the cycle requeues them). Nodes already failed when the
        controller started have no work here. A node the executor failed to stop is tried
        again at the next step."""
        failed = self._not_ready(nodes)
        if self._failed_nodes is None:
            self._failed_nodes = failed
            return
        newly = sorted(failed - self._failed_nodes)
        self._failed_nodes = failed | self._recovering
        if not self.executor.capabilities.can_fail_nodes:
            return
        for name in newly:
            try:
                self.executor.fail_node(name)
            except Exception as error:  # any executor failure: retried next step
                self._executor_failed(f"stop the work on node {name}", error, report)
                self._failed_nodes.discard(name)

    def _not_ready(self, nodes: Sequence[NodeSpec]) -> set[str]:
        """The names of the nodes that are not ready: the answer for the very same specs is
        the one before (a spec never changes; a store hands out the same ones while its
        inventory stands)."""
        seen = self._seen.not_ready
        if len(seen[0]) == len(nodes) and all(map(operator.is_, seen[0], nodes)):
            return set(seen[1])
        failed = {str(node.name) for node in nodes if not node.ready}
        self._seen.not_ready = (tuple(nodes), frozenset(failed))
        return failed

    def _return_recovered_nodes(self, stored: Iterable[NodeSpec], report: StepReport) -> None:
        """A node failed at the last step that a user marked healthy since is handed back to
        the cluster (``recover_node``: Slurm resumes a node ``fail_node`` set DOWN) — before
        the step takes the cluster's nodes, so that their report shows it back rather than
        failing it again. One the executor failed to hand back is tried again next step."""
        if not self._failed_nodes or not self.executor.capabilities.can_fail_nodes:
            return
        nodes = {str(node.name): node for node in stored}
        self._recovering = set()
        for name in sorted(self._failed_nodes):
            node = nodes.get(name)
            if node is None or not node.ready:
                continue  # still failed, or removed from the inventory
            try:
                self.executor.recover_node(name)
            except Exception as error:  # retried next step
                self._executor_failed(f"return node {name} to the cluster", error, report)
                self._recovering.add(name)
                continue
            self._failed_nodes.discard(name)

    def _dispatch(
        self,
        result: CycleResult,
        after: Mapping[JobId, JobView],
        tree: TopologyTree,
        report: StepReport,
        *,
        grace_s: float,
    ) -> None:
        """Begin stopping victims (they keep their room until STOPPED), stop requeued gangs,
        then start every admitted gang. A stop that fails leaves the gang known as launched,
        so that ``_stop_unbooked`` (``_stop_victims`` for a victim) tries again; a start that
        fails fails that gang alone."""
        for preempt in result.preemptions:
            self._ask_to_stop(preempt.victim, grace_s, report)
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
            self._stopping.discard(event.job)
        self._change_job(
            event.job, lambda job: moved_by(job, event), now=event.at_s, exit_code=event.exit_code
        )
        return False

    def _change_job(
        self,
        job_id: JobId,
        change: Callable[[JobView], JobView | None],
        *,
        now: float,
        exit_code: int | None = None,
    ) -> JobView | None:
        """Read the job, ``change`` it and save the result (None: nothing to change, e.g. the
        job is gone or the change no longer applies), redone when another writer came in
        between; the stored move is logged (``exit_code``: the executor's, when it said)."""

        def attempt() -> tuple[JobView, JobView] | None:
            try:
                job = self.store.job(job_id)
            except UnknownJob:
                return None
            after = change(job)
            if after is None:
                return None
            self.store.save_jobs([after], now=now)
            return job, after

        stored = redo_on_conflict(attempt)
        if stored is None:
            return None
        event = moved(*stored, exit_code=exit_code)
        if event is not None:
            write_event(log, event)
        return stored[1]

    def recover(self) -> list[JobId]:
        """After a restart: the gangs the store says hold capacity and the executor still
        runs (pods that outlive it) are adopted; the other jobs that hold capacity go back to
        the queue (their pods did not survive). Returns the ids requeued."""
        now = self.clock()
        cause = "the control plane restarted; the gang is requeued"
        holding_jobs = self.store.holding_jobs()  # victims being stopped (PREEMPTING) too
        kept = self.executor.adopt({job_id: job.attempt for job_id, job in holding_jobs.items()})
        for job_id in kept:  # a victim among them is asked to stop again by the next step
            self._launched[job_id] = holding_jobs[job_id].attempt
        return [
            job_id
            for job_id in holding_jobs
            if job_id not in kept
            and self._change_job(job_id, lambda job: _requeued(job, now, cause), now=now)
        ]

    def _take_inventory(self, stored_nodes: Iterable[NodeSpec], report: StepReport) -> bool:
        """An executor that knows the cluster's nodes (Kubernetes) is where the inventory
        comes from: when its nodes changed, the store gets them before the step reads them —
        keeping a cordon or failure set through topoq that the cluster did not change since
        its last report (``core.inventory_merge``). Whether the store's nodes changed."""
        try:
            nodes = self.executor.inventory_changes()
            if nodes is None:
                return False
            stored = {node.name: node for node in stored_nodes}
            merged = merged_inventory(nodes, self._reported_nodes, stored)
            self.store.save_nodes(merged, actor=SYSTEM, now=self.clock())
            self._reported_nodes = {node.name: node for node in nodes}
            change = inventory_changed(stored.values(), merged)
            if change is not None:
                write_event(log, change)
            return True
        except Exception as error:  # any executor or store failure: tried again next step
            self._executor_failed("take the cluster's nodes", error, report)
            return False


def _killed(job: JobView, *, now: float, cause: str) -> JobView | None:
    """A victim whose pods were killed past its grace period, back in the queue (None when a
    STOPPED or a user's cancel came in between)."""
    if job.phase is not JobPhase.PREEMPTING:
        return None
    return advance(job, JobPhase.PENDING, now=now, cause=cause)


def _requeued(job: JobView, now: float, cause: str) -> JobView | None:
    """Back to the queue, or None when it no longer holds capacity (a user's cancel came in
    between)."""
    if not job.phase.holds_capacity:
        return None
    return advance(job, JobPhase.PENDING, now=now, cause=cause)


def holders_after(
    holders: Mapping[JobId, JobView], moves: Mapping[JobId, JobView]
) -> Mapping[JobId, JobView]:
    """The jobs holding capacity (admitted, running, preempting) after ``moves``, from
    ``holders``, those holding it before: what the moves changed, not a pass over every
    holder."""
    if not moves:
        return holders
    after = dict(holders)
    for job_id, view in moves.items():
        if view.phase in HOLDING_PHASES:
            after[job_id] = view
        else:
            after.pop(job_id, None)
    return after
