"""The simulated shell around the unchanged core: a virtual clock, an event queue and an
executor that starts gangs at once and ends them after their run time.

The loop takes every event due at the next instant (scenario events, ends of runs, victims
that stopped, interval ticks; ties in insertion order), applies them, then runs a scheduling
cycle on a snapshot and applies its decisions with ``apply_cycle(..., start_at_once=True)``.
A victim is PREEMPTING, holding its GPUs, for the scenario's ``stop_delay_s``; then it
STOPPED and is requeued (at once when the delay is 0). What an executor's report does to a job
(a run that ended, a victim that stopped) is ``topoq.engine.outcomes.moved_by``, as in the
controller. When a cycle preempted, requeued or cancelled something, another cycle follows at
the same instant (so without a stop delay the preemptor starts there). The tree is rebuilt
only when a node fails or recovers. The run ends at ``until_s``, or when no event is left:
jobs still pending then are reported with their last diagnostic.

The simulator's own work per cycle is proportional to what changed, not to the jobs ever
submitted, so that a long scenario costs what its cycles cost: the snapshot carries only the
unfinished jobs (the finished ones that jobs depend on go in as ``upstream_phases``, as in the
controller), the cycle's decisions are applied to the jobs they name, the jobs holding
capacity (what fair-share usage accrues from) and the pending ones are kept as they change,
and the cycle's ``Parking`` is handed to the next.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from topoq.core.cycle import Parking, Snapshot, schedule_with_parking
from topoq.core.fair_share import TeamUsage, kept_half_life_s, shares_of, usage_at
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.time_limits import failed_by_limit, time_limit_of
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.governance import TeamName
from topoq.domain.job import FailureReason, JobId, JobPhase, JobView
from topoq.domain.node import NodeName, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.outcomes import moved_by
from topoq.engine.ports import ExecutorEvent, ExecutorEventKind
from topoq.sim.eta_error import EtaError, eta_error
from topoq.sim.events import Cancel, FailNode, Hold, Release, ScenarioEvent, Submit
from topoq.sim.holdings import TeamHoldings
from topoq.sim.log import Decision, DecisionLog, LogEntry, Outcome, json_lines
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

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.now = 0.0
        self.unfinished: dict[JobId, JobView] = {}
        """Pending, admitted, running and preempting jobs, in submission order: what a
        cycle's snapshot carries."""
        self.finished: dict[JobId, JobView] = {}
        """Jobs that succeeded, failed or were cancelled: out of every later snapshot."""
        self._pending: set[JobId] = set()
        """The pending jobs (held ones too): whether an interval tick has anything to do."""
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
        """Cycles until one changes nothing that a next cycle could use; False on livelock."""
        for _ in range(MAX_CYCLES_PER_INSTANT):
            result = self._cycle()
            if not (result.preemptions or result.requeues or result.cancellations):
                return True
        self._warnings.append(
            f"stopped at {self.now:g} s: {MAX_CYCLES_PER_INSTANT} cycles in a row kept "
            "preempting, requeueing or cancelling without settling"
        )
        return False

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
    def _cycle(self) -> CycleResult:
        if self._tree is None:
            self._tree = build_tree(self._nodes.values(), self.scenario.topology)
        policy = self.scenario.policy
        self.fair_share_usage = usage_at(
            self.fair_share_usage,
            self._held,
            since_s=self._accounted_at,
            now_s=self.now,
            half_life_s=kept_half_life_s(policy),
        )
        self._accounted_at = self.now
        snapshot = Snapshot(
            self.now,
            self._tree,
            tuple(self.unfinished.values()),
            policy,
            upstream_phases=self._upstream_phases,
            fair_share_usage=shares_of(self.fair_share_usage),
        )
        result, self._parking = schedule_with_parking(snapshot, self._parking)
        self.cycles += 1
        self.log.cycle(self.now, result, self.unfinished)
        named = {job: self.unfinished[job] for job in decided_jobs(result)}
        for moved in apply_cycle(named, result, now=self.now, start_at_once=True).values():
            self._store(moved)
        if kept_half_life_s(policy) > 0:  # else no usage is kept: the fractions go unused
            self._held = self._holdings.borrowed_fractions(policy, self._tree)
        stopped = [r.job for r in result.requeues] + [c.job for c in result.cancellations]
        for job in stopped + [p.victim for p in result.preemptions]:
            self._runs.pop(job, None)
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

    def _job(self, job_id: JobId) -> JobView:
        found = self.unfinished.get(job_id)
        return found if found is not None else self.finished[job_id]

    def _start(self, job_id: JobId) -> None:
        run = self._pushed
        self._runs[job_id] = run
        job = self.unfinished[job_id]
        runtime = job.spec.runtime_s or 0.0
        limit = time_limit_of(self.scenario.policy, job)
        if limit is not None and limit < runtime:  # stopped at its limit (TIME_LIMIT_REACHED)
            self._push(self.now + limit, _RunEnds(job_id, run, by_limit=True))
        else:
            self._push(self.now + runtime, _RunEnds(job_id, run))

    # --- the executor's reports -----------------------------------------------------
    def _run_ended(self, job_id: JobId, by_limit: bool) -> None:
        del self._runs[job_id]
        job = self.unfinished[job_id]
        if by_limit:
            failed = failed_by_limit(job, self.now, self.scenario.policy)
            if failed is not None:
                self._store(failed)
                entry = LogEntry(self.now, Decision.FAIL, job_id, job.team)
                reason = FailureReason.TIME_LIMIT_REACHED.value
                self.log.add(replace(entry, reason=reason, message=failed.history[-1].cause))
                return
        codes = self._exit_codes[job_id]
        code = codes[min(job.failures, len(codes) - 1)]
        moved = self._report(job, ExecutorEventKind.EXITED, exit_code=code)
        if moved is None:
            return
        entry = LogEntry(self.now, Decision.FINISH, job_id, job.team)
        if moved.phase is JobPhase.SUCCEEDED:
            self.log.add(replace(entry, reason=Outcome.SUCCEEDED.value))
            return
        decision = Decision.RETRY if moved.phase is JobPhase.PENDING else Decision.FAIL
        message = moved.history[-1].cause
        self.log.add(
            replace(entry, decision=decision, reason=Outcome.EXIT_CODE.value, message=message)
        )

    def _victim_stopped(self, job_id: JobId, attempt: int) -> None:
        job = self._job(job_id)
        moved = self._report(job, ExecutorEventKind.STOPPED, attempt=attempt)
        if moved is not None:
            entry = LogEntry(self.now, Decision.STOPPED, job_id, job.team)
            self.log.add(replace(entry, message=moved.history[-1].cause))

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
            decision = Decision.NODE_FAILED if failed else Decision.NODE_RECOVERED
            self.log.add(LogEntry(self.now, decision, node=action.node))

    def _submit(self, submit: Submit) -> None:
        spec = submit.spec
        self._store(JobView(spec))
        self._depended_on.update(dependency.job for dependency in spec.dependencies)
        self._exit_codes[spec.id] = submit.exit_codes
        gpus = sum(ps.requests.amount(NVIDIA_GPU) * ps.count for ps in spec.workload.pod_sets)
        self.log.add(LogEntry(self.now, Decision.SUBMIT, spec.id, spec.team, gpus=gpus))

    def _cancel(self, job_id: JobId) -> None:
        job = self._job(job_id)
        entry = LogEntry(self.now, Decision.CANCEL, job_id, job.team)
        if job.phase.finished:
            message = f"the job already ended ({job.phase.value}); nothing to cancel"
            self.log.add(replace(entry, reason=Outcome.ALREADY_FINISHED.value, message=message))
            return
        self._store(advance(job, JobPhase.CANCELLED, now=self.now, cause="cancelled"))
        self._runs.pop(job_id, None)
        self.log.add(
            replace(entry, reason=Outcome.CANCELLED_BY_USER.value, message="cancelled by the user")
        )

    # --- the result -----------------------------------------------------------------
    def _result(self) -> SimulationResult:
        capacity = sum(node.allocatable.amount(NVIDIA_GPU) for node in self.scenario.nodes)
        entries = tuple(self.log.entries)
        summary = summarize(entries, self.scenario.policy, capacity_gpus=capacity, end_s=self.now)
        pending = []
        for job in self.unfinished.values():
            if job.phase is JobPhase.PENDING:
                last = self.log.last_waits.get(job.id)
                reason = last.reason.value if last else None
                pending.append(
                    LeftPending(job.id, job.team, reason, last.message if last else None)
                )
        running = tuple(j.id for j in self.unfinished.values() if j.phase is JobPhase.RUNNING)
        return SimulationResult(
            self.scenario.name,
            entries,
            summary,
            tuple(pending),
            running,
            self.now,
            self.cycles,
            tuple(self._warnings),
            eta_error(entries),
        )


def decided_jobs(result: CycleResult) -> set[JobId]:
    """The jobs a cycle's decisions move (requeued, cancelled, preempted, admitted)."""
    return {
        *(requeue.job for requeue in result.requeues),
        *(cancel.job for cancel in result.cancellations),
        *(preempt.victim for preempt in result.preemptions),
        *(admit.job for admit in result.admissions),
    }
