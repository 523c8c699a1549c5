"""A scenario run by the real controller (``topoq.engine.controller``) on a virtual clock:
issue 14 §1, "one shell around the core".

This runs a scenario through the very controller a ``topoq server`` runs, through its ports: a
:class:`ReplayStore` (in memory, unfinished jobs apart from finished ones), a
``sim.executor.SimulatedExecutor`` (a gang starts at once, runs for its run time — paced by
the cost model when there is one — and exits with the scenario's exit code; a victim stops
after the scenario's stop delay, within the grace period; a failed node loses its gangs) and a
``sim.executor.VirtualClock``. The scenario's events go in as a user's would: submissions,
cancels, holds and releases through the controller's ``Intake``, failed and recovered nodes as
``topoq nodes`` marks them.

At each instant (a scenario event, an executor report, a time rule coming due: a time limit,
the starvation guard; a step on the scenario's ``cycle_interval_s`` while jobs wait) the driver
steps the controller until a step changes nothing more at that instant.
``simulate_through_controller`` reports the run as ``topoq simulate`` does, its decision log
written from what the steps stored; ``run_through_controller`` returns every job as the store
ends with it — histories the server would have written — so that a test can hold
``sim.engine``'s decisions against the controller's on the same scenario
(``tests/sim/test_controlled.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

from topoq.core.cycle import PlacementMode
from topoq.core.cycle.by_phase import TellingRead
from topoq.core.fair_share import TeamUsage
from topoq.core.starvation import next_time_rule_change
from topoq.domain.decisions import CycleResult
from topoq.domain.governance import TeamName
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView, PhaseChange
from topoq.domain.placement import placement_best_span
from topoq.engine.controller import Controller, StepDecision, StepReport
from topoq.engine.memory_records import MemoryRecords
from topoq.engine.ports import (
    AuditEntry,
    DuplicateJob,
    ExecutorEvent,
    ExecutorEventKind,
    UnknownJob,
)
from topoq.sim.events import Cancel, FailNode, Hold, Release, ScenarioEvent, Submit
from topoq.sim.executor import SimulatedExecutor, VirtualClock
from topoq.sim.log import Decision, DecisionLog, LogEntry, StartCost, cancel_entry
from topoq.sim.network import NetworkModel
from topoq.sim.result import PROGRESS_EVERY_CYCLES, Progress, SimulationResult, simulation_result
from topoq.sim.scenario import Scenario

ACTOR = "simulation"
"""Who the scenario's submissions, cancels and node marks are by, in the audit log."""
MAX_STEPS_PER_INSTANT = 100
"""Steps at one instant before the run stops there with a warning (a livelock)."""


class ReplayStore(MemoryRecords):
    """The controller's ``Store`` in memory: unfinished jobs apart from finished ones, so that
    a step reads what is live, not every job ever submitted."""

    def __init__(self) -> None:
        super().__init__()
        self.unfinished: dict[JobId, JobView] = {}
        self.finished: dict[JobId, JobView] = {}
        self.cycles = 0
        """Cycles whose decisions were stored."""
        self.replaced: dict[JobId, JobView] = {}
        """The view each job had before it was first saved since ``replaced`` was emptied
        (what a step found, for its log)."""
        self.pending: set[JobId] = set()
        """The pending jobs (held ones too): whether an interval tick has anything to do."""
        self._written: dict[JobId, None] = {}
        """The jobs written since the last read of the unfinished ones, in order."""
        self._read: object = None
        """The mark of that read (``TellingRead``)."""

    def add_job(
        self, spec: JobSpec, *, actor: str, now: float, audit: AuditEntry | None = None
    ) -> JobView:
        if spec.id in self.unfinished or spec.id in self.finished:
            raise DuplicateJob(f"job {spec.id} was already submitted")
        view = JobView(spec, history=(PhaseChange(now, JobPhase.PENDING, "submitted"),))
        self.unfinished[spec.id] = view
        self.pending.add(spec.id)
        self._written[spec.id] = None
        if audit is not None:
            self.audit_rows.append(audit)
        return view

    def jobs(self, *, include_finished: bool = False) -> dict[JobId, JobView]:
        """Every job, or the unfinished ones as a read that tells which changed since the
        read before (``TellingRead``: the controller's index takes those, not every job)."""
        if include_finished:
            return {**self.unfinished, **self.finished}
        unfinished, written = self.unfinished, self._written
        changed = [unfinished[job] for job in written if job in unfinished]
        gone = [job for job in written if job not in unfinished]
        mark = object()
        read = TellingRead(unfinished, self._read, mark, changed, gone)
        self._read, self._written = mark, {}
        return read

    def holding_jobs(self) -> dict[JobId, JobView]:
        return {k: v for k, v in self.unfinished.items() if v.phase.holds_capacity}

    def job(self, job_id: JobId) -> JobView:
        found = self.unfinished.get(job_id) or self.finished.get(job_id)
        if found is None:
            raise UnknownJob(f"no job {job_id}")
        return found

    def phases_of(self, ids: Collection[JobId]) -> dict[JobId, JobPhase]:
        found = {}
        for job_id in ids:
            job = self.unfinished.get(job_id) or self.finished.get(job_id)
            if job is not None:
                found[job_id] = job.phase
        return found

    def save_jobs(
        self, changed: Sequence[JobView], *, now: float, decisions: CycleResult | None = None
    ) -> None:
        for view in changed:
            before = self.unfinished.get(view.id)
            if before is not None:
                self.replaced.setdefault(view.id, before)
            self._written[view.id] = None
            if view.phase.finished:
                self.unfinished.pop(view.id, None)
                self.finished[view.id] = view
            else:
                self.unfinished[view.id] = view
            if view.phase is JobPhase.PENDING:
                self.pending.add(view.id)
            else:
                self.pending.discard(view.id)
        if decisions is not None:
            self.cycles += 1


@dataclass(frozen=True)
class ControlledRun:
    jobs: dict[JobId, JobView]
    """Every job as the store ends with it, with its whole history."""
    steps: int
    cycles: int
    """Steps whose cycle ran and stored its decisions (the rest were settled)."""


def run_through_controller(scenario: Scenario) -> ControlledRun:
    """The scenario through the real controller on a virtual clock, to its last event (or
    ``until_s``)."""
    run = ScenarioRun(scenario)
    run.run()
    return ControlledRun(run.store.jobs(include_finished=True), run.steps, run.store.cycles)


def simulate_through_controller(
    scenario: Scenario,
    placement: PlacementMode = PlacementMode.TOPOQ,
    network: NetworkModel | None = None,
    progress: Progress | None = None,
) -> SimulationResult:
    """The scenario through the real controller, reported as ``topoq simulate`` reports a
    run (``sim.engine.SimulationResult``): the decision log is written from what the
    controller's steps decided and stored (its cycles' decisions, the executor's reports it
    applied) and the scenario's events as a user made them. ``placement``: how the
    controller's cycles place gangs (a baseline's, to compare); ``network``: the cost model
    that paces runs (None: a gang runs for its run time wherever it lands); ``progress``:
    told the simulated time and the cycles so far every ``PROGRESS_EVERY_CYCLES`` cycles."""
    run = ScenarioRun(scenario, DecisionLog(), placement, network)
    run.run(progress)
    return run.result()


class ScenarioRun:
    """One run of a scenario through the controller: the controller, its ports, the virtual
    clock and the scenario's events. ``run(progress)`` it once, then ask it its ``result()``
    (``sim.engine.Simulation``); with a ``log``, the decision log is written to it."""

    def __init__(
        self,
        scenario: Scenario,
        log: DecisionLog | None = None,
        placement: PlacementMode = PlacementMode.TOPOQ,
        network: NetworkModel | None = None,
    ) -> None:
        self.scenario = scenario
        self.clock = clock = VirtualClock()
        self.store = store = ReplayStore()
        store.save_nodes(scenario.nodes, actor=ACTOR, now=0.0)
        store.save_policy(scenario.policy, actor=ACTOR, now=0.0)
        submits = [event.action for event in scenario.events if isinstance(event.action, Submit)]
        self.executor = SimulatedExecutor(
            clock,
            {submit.spec.id: submit.exit_codes for submit in submits},
            scenario.stop_delay_s,
            network=network,
            tree=lambda: self.controller.trees.tree(store.nodes()),
            shares={
                submit.spec.id: submit.communication_share
                for submit in submits
                if submit.communication_share is not None
            },
        )
        self.controller = Controller(
            store, self.executor, scenario.topology, clock=clock, placement=placement
        )
        self.log = log
        self.steps = 0
        self.cycles = 0
        """Steps whose decisions a cycle (or arrivals taken without one) reached."""
        self.warnings: list[str] = list(scenario.warnings)
        self._tick_at: float | None = None
        """The next step on the scenario's interval (``cycle_interval_s``), while jobs wait."""

    def run(self, progress: Progress | None = None) -> None:
        scenario, clock, executor = self.scenario, self.clock, self.executor
        pending = list(reversed(scenario.events))  # popped from the end: the earliest first
        visits = 0  # in a row at the same instant: a time rule that stays due is a livelock
        told = 0
        while True:
            if progress is not None and self.cycles - told >= PROGRESS_EVERY_CYCLES:
                told = self.cycles
                progress(clock.now, self.cycles)
            due = [
                at
                for at in (
                    pending[-1].at_s if pending else None,
                    executor.next_at(),
                    _time_rule(self.controller, self.store, clock.now),
                    self._tick_at,
                )
                if at is not None
            ]
            if not due:
                break
            at = max(min(due), clock.now)
            if scenario.until_s is not None and at > scenario.until_s:
                clock.now = scenario.until_s
                break
            visits = visits + 1 if at == clock.now else 0
            if visits > MAX_STEPS_PER_INSTANT:
                self._stopped(at, "a time rule came due again and again")
                return
            clock.now = at
            if self._tick_at is not None and self._tick_at <= at:
                self._tick_at = None
            while pending and pending[-1].at_s <= at:
                self._apply(pending.pop())
            if not self._steps_until_settled(at):
                self._stopped(at, "steps kept moving jobs")
                return
            self._next_tick(bool(pending))

    def _stopped(self, at: float, why: str) -> None:
        """The run ends at ``at``, with a warning, rather than loop there for ever."""
        self.warnings.append(
            f"stopped at {at:g} s: {MAX_STEPS_PER_INSTANT} steps at that instant without "
            f"settling ({why})"
        )

    def _next_tick(self, events_left: bool) -> None:
        """The next step on the scenario's interval, while jobs wait and something else is
        still to come (a scenario event, an executor's report): a server steps on its
        interval, and a step alone changes nothing but the teams' fair-share usage."""
        interval = self.scenario.cycle_interval_s
        if interval is None or self._tick_at is not None or not self.store.pending:
            return
        if events_left or self.executor.next_at() is not None:
            self._tick_at = (self.clock.now // interval + 1) * interval

    def _steps_until_settled(self, at: float) -> bool:
        """Step the controller at ``at`` until a step changes nothing and no report is due;
        whether that came within ``MAX_STEPS_PER_INSTANT`` steps."""
        for _ in range(MAX_STEPS_PER_INSTANT):
            self.store.replaced.clear()
            report = self.controller.step()
            self.steps += 1
            if report.decided_by in DECIDING:
                self.cycles += 1
            if self.log is not None:
                self._log_step(report, _Found(self.store))
            result = report.result
            moved = (
                report.events
                or report.timed_out
                or result.admissions
                or result.preemptions
                or result.requeues
                or result.cancellations
            )
            due = self.executor.next_at()
            if (not moved or report.settles_next) and (due is None or due > at):
                return True
        return False

    def _apply(self, event: ScenarioEvent) -> None:
        """A scenario event as a user (or the cluster) makes it, and its log entry."""
        action, intake, now = event.action, self.controller.intake, self.clock.now
        entry: LogEntry | None
        if isinstance(action, Submit):
            spec = action.spec
            intake.submit(spec, actor=ACTOR)
            entry = LogEntry(now, Decision.SUBMIT, spec.id, spec.team, gpus=spec.workload.gpus)
        elif isinstance(action, Cancel):
            entry = self._cancel(action.job)
        elif isinstance(action, Hold | Release):
            held = isinstance(action, Hold)
            intake.set_held(action.job, held, actor=ACTOR)
            job = self.store.job(action.job)
            entry = LogEntry(now, Decision.HOLD if held else Decision.RELEASE, job.id, job.team)
        else:
            failed = isinstance(action, FailNode)
            intake.mark_node(str(action.node), ready=not failed, actor=ACTOR)
            decision = Decision.NODE_FAILED if failed else Decision.NODE_RECOVERED
            entry = LogEntry(now, decision, node=action.node)
        if self.log is not None:
            self.log.add(entry)

    def _cancel(self, job_id: JobId) -> LogEntry:
        job = self.store.job(job_id)
        if not job.phase.finished:
            self.controller.intake.cancel(job_id, actor=ACTOR)
        return cancel_entry(self.clock.now, job)

    def _log_step(self, report: StepReport, before: Mapping[JobId, JobView]) -> None:
        """The entries of what one step stored: the executor's reports, the jobs past their
        time limit, then its cycle's decisions."""
        assert self.log is not None
        log, now = self.log, self.clock.now
        for event in report.events:
            self._log_report(event, before)
        for job_id in report.timed_out:
            job = self.store.job(job_id)
            moved = _change_after(before.get(job_id), job)
            log.timed_out(now, job, moved.cause if moved else None)
        if report.decided_by in DECIDING:
            log.cycle(now, report.result, _Stored(self.store), self._start_costs(report.result))

    def _start_costs(self, result: CycleResult) -> dict[JobId, StartCost]:
        """How each gang the cycle admitted started under the cost model: its slow-down once
        every one of them started, and the fewest domains per level the free capacity
        allowed it (its placement's ``best_span``)."""
        if self.executor.network is None:
            return {}
        return {
            admit.job: StartCost(
                self.executor.slowdown(admit.job),
                placement_best_span(admit.allocation.placement),
            )
            for admit in result.admissions
        }

    def _log_report(self, event: ExecutorEvent, before: Mapping[JobId, JobView]) -> None:
        assert self.log is not None
        log, job_id = self.log, event.job
        if job_id is None or event.kind not in _LOGGED_REPORTS:
            return
        job = self.store.job(job_id)
        moved = _change_after(before.get(job_id), job)
        if moved is None:
            return  # stale: the run was stopped, cancelled or requeued meanwhile
        if event.kind is ExecutorEventKind.STOPPED:
            log.victim_stopped(event.at_s, job, moved.cause)
        else:
            slowdown = self.executor.run_slowdowns.pop(job_id, None)
            log.run_ended(event.at_s, job, moved.phase, moved.cause, slowdown)

    def fair_share_usage(self) -> dict[TeamName, TeamUsage]:
        """Each team's decayed fair-share usage as of the last step (as a server saves it
        when it stops)."""
        self.controller.save_fair_share_usage()
        return self.store.fair_share_usage()

    def result(self) -> SimulationResult:
        """What ``sim.engine.Simulation.run`` reports, from the store and the log."""
        assert self.log is not None
        store = self.store
        return simulation_result(
            self.scenario,
            self.log,
            store.unfinished.values(),
            store.jobs(include_finished=True).values(),
            self.clock.now,
            self.cycles,
            self.warnings,
        )


DECIDING = (StepDecision.CYCLE, StepDecision.ARRIVALS)
"""How the steps whose decisions a cycle reached (or arrivals taken without one) decided."""
_LOGGED_REPORTS = (ExecutorEventKind.EXITED, ExecutorEventKind.STOPPED)


def _change_after(before: JobView | None, after: JobView) -> PhaseChange | None:
    """The first change of ``after`` since ``before`` (None: none, a stale report)."""
    known = len(before.history) if before is not None else 0
    return after.history[known] if len(after.history) > known else None


class _Stored(Mapping[JobId, JobView]):
    """Every job as the store holds it now, looked up one at a time (the log asks for the few
    a cycle names)."""

    def __init__(self, store: ReplayStore) -> None:
        self._store = store

    def __getitem__(self, job: JobId) -> JobView:
        try:
            return self._store.job(job)
        except UnknownJob:
            raise KeyError(job) from None

    def __iter__(self) -> Iterator[JobId]:
        return iter({**self._store.unfinished, **self._store.finished})

    def __len__(self) -> int:
        return len(self._store.unfinished) + len(self._store.finished)


class _Found(_Stored):
    """Every job as the step found it: the views it replaced, else as stored now."""

    def __getitem__(self, job: JobId) -> JobView:
        before = self._store.replaced.get(job)
        return before if before is not None else super().__getitem__(job)


def _time_rule(controller: Controller, store: ReplayStore, now: float) -> float | None:
    """When a time rule next changes an answer after ``now`` (a running job's time limit,
    a waiting job passing the starvation guard): as the controller worked it out after its
    last step, which moved no job; before the first step, from every unfinished job."""
    try:
        return controller.time_rule_due()
    except LookupError:
        pass
    policy = store.policy()
    if policy is None or not store.unfinished:
        return None
    return next_time_rule_change(store.unfinished.values(), now, policy)
