"""The simulated shell around the unchanged core: a virtual clock, an event queue and an
executor that starts gangs at once and ends them after their run time.

The loop takes every event due at the next instant (scenario events, ends of runs, victims
that stopped, interval ticks; ties in insertion order), applies them, then runs a scheduling
cycle on a snapshot and applies its decisions with ``apply_cycle(..., start_at_once=True)``.
A victim is PREEMPTING, holding its GPUs, for the scenario's ``stop_delay_s``; then it
STOPPED and is requeued (at once when the delay is 0). What an executor's report does to a job
(a run that ended, a victim that stopped) is ``topoq.engine.outcomes.moved_by``, as in the
controller. When a cycle preempted, requeued or cancelled something, or admitted a job past the
starvation guard, another cycle follows at the same instant (so without a stop delay the
preemptor starts there, and the guard's next hold is made there, as a server's next step makes
it once the gang reports started). The tree is rebuilt only when a node fails or recovers.
The run ends at ``until_s``, or when no event is left: jobs still pending then are reported
with their last diagnostic.

The simulator's own work per cycle is proportional to what changed, not to the jobs ever
submitted, so that a long scenario costs what its cycles cost: the snapshot carries only the
unfinished jobs (the finished ones that jobs depend on go in as ``upstream_phases``, as in the
controller), the cycle's decisions are applied to the jobs they name, the jobs holding
capacity (what fair-share usage accrues from) and the pending ones are kept as they change,
and the cycle's ``Parking`` is handed to the next.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from topoq.core.cycle import Parking, PlacementMode, Snapshot, schedule_with_parking
from topoq.core.cycle.by_phase import PhaseIndex
from topoq.core.cycle.preempting import started_starving
from topoq.core.fair_share import TeamUsage, kept_half_life_s, shares_of, usage_at
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.time_limits import failed_by_limit, time_limit_of
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.governance import TeamName
from topoq.domain.job import Allocation, JobId, JobPhase, JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.placement import placement_best_span
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.workload import PodSetSpec
from topoq.engine.outcomes import moved_by
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.engine.team_holdings import TeamHoldings
from topoq.sim.eta_error import EtaError, eta_error
from topoq.sim.events import Cancel, FailNode, Hold, Release, ScenarioEvent, Submit
from topoq.sim.log import Decision, DecisionLog, LogEntry, StartCost, cancel_entry, json_lines
from topoq.sim.network import NetworkModel, NetworkState, default_communication_share
from topoq.sim.scenario import Scenario, load_scenario
from topoq.sim.summary import Summary, summarize

MAX_CYCLES_PER_INSTANT = 100
"""Follow-up cycles at one instant before the run stops as a livelock."""


@dataclass(frozen=True)
class _RunEnds:
    job: JobId
    run: int
    by_limit: bool = False
    """The run ends at the job's time limit, before its run time."""


@dataclass
class _Pace:
    """A running job's progress under the cost model."""

    runtime_s: float
    """Its run time at its tightest placement alone (the trace's)."""
    work_s: float
    """What is left of it."""
    started_s: float
    since_s: float
    """When ``work_s`` was last brought up to date."""
    limit_s: float | None
    slowdown: float = 1.0


@dataclass(frozen=True)
class _VictimStops:
    job: JobId
    attempt: int


@dataclass(frozen=True)
class _Tick:
    """A cycle on the scenario's interval."""


_Item = ScenarioEvent | _RunEnds | _VictimStops | _Tick


@dataclass(frozen=True)
class LeftPending:
    job: JobId
    team: TeamName
    reason: str | None
    message: str | None


@dataclass(frozen=True)
class SimulationResult:
    scenario: str
    log: tuple[LogEntry, ...]
    summary: Summary
    left_pending: tuple[LeftPending, ...]
    """Jobs still pending at the end, with their last diagnostic."""
    still_running: tuple[JobId, ...]
    end_s: float
    cycles: int
    warnings: tuple[str, ...] = ()
    eta_error: EtaError = field(default_factory=lambda: EtaError(0))
    """How far the first ETA each job was given was from its actual start."""
    nodes: tuple[NodeSpec, ...] = ()
    """The cluster at the start (node failures and recoveries are in the log); none for a
    recorded history (``sim.history``), whose log does not say where pods ran."""
    pod_sets: Mapping[JobId, tuple[PodSetSpec, ...]] = field(default_factory=dict)
    """Each submitted job's pod sets (what its pods ask for, where they may go)."""

    def log_lines(self) -> list[str]:
        return list(json_lines(self.log))

    def document(self) -> dict[str, Any]:
        """The summary and the end state as JSON (the log is separate: :meth:`log_lines`)."""
        return {
            "scenario": self.scenario,
            "end_s": self.end_s,
            "cycles": self.cycles,
            "summary": self.summary.document(),
            "left_pending": [asdict(job) for job in self.left_pending],
            "still_running": list(self.still_running),
            "warnings": list(self.warnings),
            "eta_error": asdict(self.eta_error),
        }


def run_scenario(path: Path | str) -> SimulationResult:
    """Read the scenario file and simulate it."""
    return Simulation(load_scenario(path)).run()


Progress = Callable[[float, int], None]
"""Told the simulated time and the cycles run so far."""
PROGRESS_EVERY_CYCLES = 200


class Simulation:
    """One run of a scenario; ``run()`` once."""

    def __init__(
        self,
        scenario: Scenario,
        network: NetworkModel | None = None,
        placement: PlacementMode = PlacementMode.TOPOQ,
    ) -> None:
        self.scenario = scenario
        self.placement = placement
        """How the cycles place gangs: topoq's way, or a baseline's (``PlacementMode``)."""
        self.network = network
        """The communication cost model (None: a job runs for its run time wherever it
        lands)."""
        self._traffic: NetworkState | None = None
        self._paces: dict[JobId, _Pace] = {}
        """How far each running job has got, under the cost model."""
        self.now = 0.0
        self.unfinished: dict[JobId, JobView] = {}
        """Pending, admitted, running and preempting jobs, in submission order: what a
        cycle's snapshot carries."""
        self.finished: dict[JobId, JobView] = {}
        """Jobs that succeeded, failed or were cancelled: out of every later snapshot."""
        self._pending: set[JobId] = set()
        """The pending jobs (held ones too): whether an interval tick has anything to do."""
        self._phases = PhaseIndex()
        """The unfinished jobs sorted out by phase as they are stored: each snapshot hands
        them to the cycle (``Snapshot.by_phase``) instead of the cycle sorting out every job."""
        self._holdings = TeamHoldings()
        """The jobs holding capacity, which the teams' fair-share usage accrues from."""
        self._depended_on: set[JobId] = set()
        """Every job a submitted job depends on."""
        self._upstream_phases: dict[JobId, JobPhase] = {}
        """The phase of each finished job another depends on; replaced, never changed, so
        each snapshot keeps the one it was given."""
        self._parking: Parking | None = None
        self.log = DecisionLog()
        self.cycles = 0
        self._exit_codes: dict[JobId, tuple[int, ...]] = {}
        self._nodes: dict[NodeName, NodeSpec] = {node.name: node for node in scenario.nodes}
        self._tree: TopologyTree | None = None
        self._queue: list[tuple[float, int, _Item]] = []
        self._pushed = 0
        self._runs: dict[JobId, int] = {}
        self._tick_queued = False
        self._warnings: list[str] = list(scenario.warnings)
        self.fair_share_usage: dict[TeamName, TeamUsage] = {}
        """Each team's decayed fair-share usage as of the last cycle (``core.fair_share``)."""
        self._held: dict[TeamName, float] = {}
        self._accounted_at = 0.0
        self._nodes_moved = False
        """A node failed or recovered since the last cycle (its gangs may need requeueing)."""
        self._shares: dict[JobId, float] = {}
        """Each job's communication share, where its submission gave one."""

    # --- the loop -------------------------------------------------------------------
    def run(self, progress: Progress | None = None) -> SimulationResult:
        """The whole run; ``progress(simulated_s, cycles)`` is told every
        ``PROGRESS_EVERY_CYCLES`` cycles (a long replay's progress bar)."""
        for event in self.scenario.events:
            self._push(event.at_s, event)
        until = self.scenario.until_s
        told = 0
        while self._queue:
            if progress is not None and self.cycles - told >= PROGRESS_EVERY_CYCLES:
                told = self.cycles
                progress(self.now, self.cycles)
            at = self._queue[0][0]
            if until is not None and at > until:
                self.now = until
                break
            self.now = at
            while self._queue and self._queue[0][0] == at:
                self._handle(heapq.heappop(self._queue)[2])
            if not self._cycles_at_instant():
                break
            self._schedule_tick()
        return self._result()

    def _push(self, at: float, item: _Item) -> None:
        heapq.heappush(self._queue, (at, self._pushed, item))
        self._pushed += 1

    def _handle(self, item: _Item) -> None:
        if isinstance(item, _RunEnds):
            if self._runs.get(item.job) == item.run:
                self._run_ended(item.job, item.by_limit)
        elif isinstance(item, _VictimStops):
            self._victim_stopped(item.job, item.attempt)
        elif isinstance(item, _Tick):
            self._tick_queued = False
        else:
            self._apply(item)

    def _cycles_at_instant(self) -> bool:
        """Cycles until one changes nothing that a next cycle could use; False on livelock.
        None while no job waits and no node failed or recovered: such a cycle decides nothing
        (it admits, preempts, cancels and explains only waiting jobs, and requeues only the
        gangs of a failed node), so only the teams' fair-share usage is brought up to date."""
        if not self._pending and not self._nodes_moved:
            self._account_usage()
            if kept_half_life_s(self.scenario.policy) > 0:
                self._held = self._holdings.borrowed_fractions(
                    self.scenario.policy, self._tree_now()
                )
            return True
        for _ in range(MAX_CYCLES_PER_INSTANT):
            result = self._cycle()
            if not (
                result.preemptions
                or result.requeues
                or result.cancellations
                or self._admitted_starving(result)
            ):
                return True
        self._warnings.append(
            f"stopped at {self.now:g} s: {MAX_CYCLES_PER_INSTANT} cycles in a row kept "
            "preempting, requeueing or cancelling without settling"
        )
        return False

    def _admitted_starving(self, result: CycleResult) -> bool:
        """Whether the cycle admitted a job past the starvation guard while jobs still wait.
        The guard's hold for it bound every job of the cycle, those considered before it too
        (one that fits only in held nodes waits, evicting nobody), and the guard holds for one
        job per cycle: a cycle at the same instant, with that job running, holds for the next
        starving job and may find a preemption this one did not try — as a server's next step
        does once the gang reports started."""
        guard = self.scenario.policy.starvation_guard_s
        return (
            guard > 0
            and bool(self._pending)  # nothing waits: a cycle could decide nothing
            and any(
                started_starving(self.unfinished[admit.job], guard) for admit in result.admissions
            )
        )

    def _schedule_tick(self) -> None:
        """The next interval tick, while jobs wait and something else is still to come (a tick
        alone changes nothing but the teams' fair-share usage, which moves with time)."""
        interval = self.scenario.cycle_interval_s
        if interval is None or self._tick_queued:
            return
        # No tick is queued, so anything queued is something else still to come.
        if self._pending and self._queue:
            self._push((self.now // interval + 1) * interval, _Tick())
            self._tick_queued = True

    # --- the cycle ------------------------------------------------------------------
    def _tree_now(self) -> TopologyTree:
        if self._tree is None:
            self._tree = build_tree(self._nodes.values(), self.scenario.topology)
        return self._tree

    def _account_usage(self) -> None:
        """The teams' fair-share usage up to now, at the fractions they held since the last
        account."""
        self.fair_share_usage = usage_at(
            self.fair_share_usage,
            self._held,
            since_s=self._accounted_at,
            now_s=self.now,
            half_life_s=kept_half_life_s(self.scenario.policy),
        )
        self._accounted_at = self.now

    def _cycle(self) -> CycleResult:
        tree = self._tree_now()
        self._nodes_moved = False
        policy = self.scenario.policy
        self._account_usage()
        snapshot = Snapshot(
            self.now,
            tree,
            tuple(self.unfinished.values()),
            policy,
            upstream_phases=self._upstream_phases,
            fair_share_usage=shares_of(self.fair_share_usage),
            placement=self.placement,
            by_phase=self._phases.sorted_out(),
        )
        result, self._parking = schedule_with_parking(snapshot, self._parking)
        self.cycles += 1
        stopped = [r.job for r in result.requeues] + [c.job for c in result.cancellations]
        for job in stopped + [p.victim for p in result.preemptions]:
            self._stop_run(job)
        costs = self._traffic_of(result) if self.network is not None else {}
        self.log.cycle(self.now, result, self.unfinished, costs)
        named = {job: self.unfinished[job] for job in decided_jobs(result)}
        for moved in apply_cycle(named, result, now=self.now, start_at_once=True).values():
            self._store(moved)
        if kept_half_life_s(policy) > 0:  # else no usage is kept: the fractions go unused
            self._held = self._holdings.borrowed_fractions(policy, tree)
        for preempt in result.preemptions:
            stops = _VictimStops(preempt.victim, self.unfinished[preempt.victim].attempt)
            if self.scenario.stop_delay_s:
                self._push(self.now + self.scenario.stop_delay_s, stops)
            else:
                self._victim_stopped(stops.job, stops.attempt)
        for admit in result.admissions:
            self._start(admit.job)
        return result

    def _store(self, job: JobView) -> None:
        """Keep ``job``'s new state where the next cycle and the reports look for it."""
        if job.phase.finished:
            self.unfinished.pop(job.id, None)
            self.finished[job.id] = job
            if job.id in self._depended_on:
                self._upstream_phases = {**self._upstream_phases, job.id: job.phase}
        else:
            self.unfinished[job.id] = job
        if job.phase is JobPhase.PENDING:
            self._pending.add(job.id)
        else:
            self._pending.discard(job.id)
        self._holdings.store(job)
        self._phases.store(job)

    def _job(self, job_id: JobId) -> JobView:
        found = self.unfinished.get(job_id)
        return found if found is not None else self.finished[job_id]

    def _start(self, job_id: JobId) -> None:
        job = self.unfinished[job_id]
        runtime = job.spec.runtime_s or 0.0
        limit = time_limit_of(self.scenario.policy, job)
        pace = _Pace(runtime, runtime, self.now, self.now, limit)
        if self._traffic is not None:
            pace.slowdown = self._traffic.slowdown(job_id)
            self._paces[job_id] = pace
        self._schedule_end(job_id, pace)

    def _schedule_end(self, job_id: JobId, pace: _Pace) -> None:
        """The run ends when its work is done at its pace, or at its time limit if that
        comes first (TIME_LIMIT_REACHED); a run rescheduled makes its earlier end stale."""
        run = self._pushed
        self._runs[job_id] = run
        done_at = self.now + pace.work_s * pace.slowdown
        if pace.limit_s is not None and pace.started_s + pace.limit_s < done_at:
            self._push(pace.started_s + pace.limit_s, _RunEnds(job_id, run, by_limit=True))
        else:
            self._push(done_at, _RunEnds(job_id, run))

    def _stop_run(self, job_id: JobId) -> None:
        """The job's run stopped (ended, preempted, requeued, cancelled): its traffic with it."""
        self._runs.pop(job_id, None)
        if self._traffic is not None and self._paces.pop(job_id, None) is not None:
            self._repace(self._traffic.end(job_id))

    def _traffic_of(self, result: CycleResult) -> dict[JobId, StartCost]:
        """Put the admitted gangs' traffic on the network; how each starts: its pace, and the
        fewest domains per level the free capacity allowed it (its placement's
        ``best_span``). The running jobs whose slow-down moved are rescheduled."""
        tree = self._tree
        if tree is None or not result.admissions:
            return {}
        if self._traffic is None or self._traffic.tree is not tree:
            self._traffic = self._network_on(tree)
        touched: set[JobId] = set()
        best: dict[JobId, dict[str, int]] = {}
        for admit in result.admissions:
            best[admit.job] = placement_best_span(admit.allocation.placement)
            touched |= self._start_traffic(
                self._traffic, self.unfinished[admit.job], admit.allocation
            )
        self._repace(touched - best.keys())
        return {job: StartCost(self._traffic.slowdown(job), span) for job, span in best.items()}

    def _network_on(self, tree: TopologyTree) -> NetworkState:
        """The traffic on a tree rebuilt (a node failed or recovered): the running jobs'
        gangs on it again."""
        assert self.network is not None
        state = NetworkState(tree, self.network)
        for job_id in self._paces:
            job = self.unfinished[job_id]
            if job.allocation is not None:
                self._start_traffic(state, job, job.allocation)
        return state

    def _start_traffic(
        self, state: NetworkState, job: JobView, allocation: Allocation
    ) -> set[JobId]:
        """The job's gang on ``state``'s network (its share: its submission's, else by its
        size); the running jobs whose slow-down that moves."""
        pods = _pod_gpus(job)
        share = self._shares.get(job.id, default_communication_share(sum(pods)))
        return state.start(job.id, _gpus_on_nodes(state.tree, allocation), pods, share)

    def _repace(self, jobs: set[JobId]) -> None:
        """The jobs' slow-downs moved: each goes on from what it has done at its new pace."""
        assert self._traffic is not None
        for job_id in jobs:
            pace = self._paces.get(job_id)
            if pace is None:
                continue
            slowdown = self._traffic.slowdown(job_id)
            if slowdown == pace.slowdown:
                continue
            pace.work_s = max(0.0, pace.work_s - (self.now - pace.since_s) / pace.slowdown)
            pace.since_s, pace.slowdown = self.now, slowdown
            self._schedule_end(job_id, pace)

    # --- the executor's reports -----------------------------------------------------
    def _run_ended(self, job_id: JobId, by_limit: bool) -> None:
        job = self.unfinished[job_id]
        pace = self._paces.get(job_id)
        self._stop_run(job_id)
        if by_limit:
            failed = failed_by_limit(job, self.now, self.scenario.policy)
            if failed is not None:
                self._store(failed)
                self.log.timed_out(self.now, job, failed.history[-1].cause)
                return
        codes = self._exit_codes[job_id]
        code = codes[min(job.failures, len(codes) - 1)]
        moved = self._report(job, ExecutorEventKind.EXITED, exit_code=code)
        if moved is None:
            return
        slowdown = None
        if pace is not None and pace.runtime_s > 0:  # the run's slow-down over its whole run
            slowdown = (self.now - pace.started_s) / pace.runtime_s
        self.log.run_ended(self.now, job, moved.phase, moved.history[-1].cause, slowdown)

    def _victim_stopped(self, job_id: JobId, attempt: int) -> None:
        job = self._job(job_id)
        moved = self._report(job, ExecutorEventKind.STOPPED, attempt=attempt)
        if moved is not None:
            self.log.victim_stopped(self.now, job, moved.history[-1].cause)

    def _report(
        self,
        job: JobView,
        kind: ExecutorEventKind,
        *,
        attempt: int = 0,
        exit_code: int | None = None,
    ) -> JobView | None:
        """The job after the simulated executor's report (stored), or None when it is stale
        (a victim cancelled or requeued while it stopped)."""
        event = ExecutorEvent(kind, self.now, job=job.id, attempt=attempt, exit_code=exit_code)
        moved = moved_by(job, event)
        if moved is not None:
            self._store(moved)
        return moved

    # --- scenario events ------------------------------------------------------------
    def _apply(self, event: ScenarioEvent) -> None:
        action = event.action
        if isinstance(action, Submit):
            self._submit(action)
        elif isinstance(action, Cancel):
            self._cancel(action.job)
        elif isinstance(action, Hold | Release):
            held = isinstance(action, Hold)
            job = self._job(action.job)
            self._store(replace(job, held=held))
            decision = Decision.HOLD if held else Decision.RELEASE
            self.log.add(LogEntry(self.now, decision, job.id, job.team))
        else:
            failed = isinstance(action, FailNode)
            node = self._nodes[action.node]
            self._nodes[action.node] = replace(node, ready=not failed)
            self._tree = None
            self._nodes_moved = True
            decision = Decision.NODE_FAILED if failed else Decision.NODE_RECOVERED
            self.log.add(LogEntry(self.now, decision, node=action.node))

    def _submit(self, submit: Submit) -> None:
        spec = submit.spec
        self._store(JobView(spec))
        self._depended_on.update(dependency.job for dependency in spec.dependencies)
        self._exit_codes[spec.id] = submit.exit_codes
        if submit.communication_share is not None:
            self._shares[spec.id] = submit.communication_share
        gpus = spec.workload.gpus
        self.log.add(LogEntry(self.now, Decision.SUBMIT, spec.id, spec.team, gpus=gpus))

    def _cancel(self, job_id: JobId) -> None:
        job = self._job(job_id)
        self.log.add(cancel_entry(self.now, job))
        if not job.phase.finished:
            self._store(advance(job, JobPhase.CANCELLED, now=self.now, cause="cancelled"))
            self._stop_run(job_id)

    # --- the result -----------------------------------------------------------------
    def _result(self) -> SimulationResult:
        return simulation_result(
            self.scenario,
            self.log,
            self.unfinished.values(),
            [*self.finished.values(), *self.unfinished.values()],
            self.now,
            self.cycles,
            self._warnings,
        )


def simulation_result(
    scenario: Scenario,
    log: DecisionLog,
    unfinished: Iterable[JobView],
    every: Iterable[JobView],
    end_s: float,
    cycles: int,
    warnings: Iterable[str],
) -> SimulationResult:
    """What a run reports, from its log and its jobs as they ended (``unfinished``: those
    still pending, running or stopping; ``every``: every job submitted)."""
    capacity = sum(node.allocatable.amount(NVIDIA_GPU) for node in scenario.nodes)
    entries = tuple(log.entries)
    summary = summarize(entries, scenario.policy, capacity_gpus=capacity, end_s=end_s)
    pending, running = [], []
    for job in unfinished:
        if job.phase is JobPhase.PENDING:
            last = log.last_waits.get(job.id)
            reason = last.reason.value if last else None
            pending.append(LeftPending(job.id, job.team, reason, last.message if last else None))
        elif job.phase is JobPhase.RUNNING:
            running.append(job.id)
    return SimulationResult(
        scenario.name,
        entries,
        summary,
        tuple(pending),
        tuple(running),
        end_s,
        cycles,
        tuple(warnings),
        eta_error(entries),
        nodes=tuple(scenario.nodes),
        pod_sets={job.id: job.spec.workload.pod_sets for job in every},
    )


def decided_jobs(result: CycleResult) -> set[JobId]:
    """The jobs a cycle's decisions move (requeued, cancelled, preempted, admitted)."""
    return {
        *(requeue.job for requeue in result.requeues),
        *(cancel.job for cancel in result.cancellations),
        *(preempt.victim for preempt in result.preemptions),
        *(admit.job for admit in result.admissions),
    }


def _gpus_on_nodes(tree: TopologyTree, allocation: Allocation | None) -> dict[int, int]:
    """The GPUs the allocation holds on each node (by index in ``tree``)."""
    if allocation is None:
        return {}
    found: dict[int, int] = {}
    for name, resources in allocation.resources_on_node.items():
        index = tree.node_index.get(NodeName(name))
        if index is not None:
            found[index] = resources.amount(NVIDIA_GPU)
    return found


def _pod_gpus(job: JobView) -> list[int]:
    return [
        pod_set.requests.amount(NVIDIA_GPU)
        for pod_set in job.spec.workload.pod_sets
        for _ in range(pod_set.count)
    ]
