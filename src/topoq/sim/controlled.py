"""A scenario run by the real controller (``topoq.engine.controller``) on a virtual clock: the
first slice of issue 14 §1, "one shell around the core".

``topoq simulate`` runs its own shell around the core (``sim.engine``). This one runs a
scenario through the very controller a ``topoq server`` runs, through its ports: a
:class:`ReplayStore` (in memory, unfinished jobs apart from finished ones), a
:class:`SimulatedExecutor` (a gang starts at once, runs for its run time and exits with the
scenario's exit code; a victim stops after the scenario's stop delay, within the grace period;
a failed node loses its gangs) and a :class:`VirtualClock`. The scenario's events go in as a
user's would: submissions, cancels, holds and releases through the controller's ``Intake``,
failed and recovered nodes as ``topoq nodes`` marks them.

At each instant (a scenario event, an executor report, a time rule coming due: a time limit,
the starvation guard) the driver steps the controller until a step changes nothing more at
that instant. What it returns is every job as the store ends with it — histories the server
would have written — so that a test can hold ``sim.engine``'s decisions against the
controller's on the same scenario (``tests/sim/test_controlled.py``).

It is not yet what ``topoq simulate`` runs: the controller reads and writes its store at every
step, and the replay of a long trace depends on the simulator's own shell being cheap per
cycle (docs/simulate.md, "How fast"). That is the next slice.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from topoq.core.starvation import next_time_rule_change
from topoq.domain.decisions import CycleResult
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView, PhaseChange
from topoq.engine.controller import Controller
from topoq.engine.memory_records import MemoryRecords
from topoq.engine.ports import (
    AuditEntry,
    DuplicateJob,
    ExecutorCapabilities,
    ExecutorEvent,
    ExecutorEventKind,
    GangLaunch,
    UnknownJob,
)
from topoq.sim.events import Cancel, FailNode, Hold, Release, ScenarioEvent, Submit
from topoq.sim.scenario import Scenario

ACTOR = "simulation"
"""Who the scenario's submissions, cancels and node marks are by, in the audit log."""
MAX_STEPS_PER_INSTANT = 100
"""Steps at one instant before the run stops as a livelock."""


class VirtualClock:
    """The controller's clock: the simulated time, moved by the driver only."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class ReplayStore(MemoryRecords):
    """The controller's ``Store`` in memory: unfinished jobs apart from finished ones, so that
    a step reads what is live, not every job ever submitted."""

    def __init__(self) -> None:
        super().__init__()
        self.unfinished: dict[JobId, JobView] = {}
        self.finished: dict[JobId, JobView] = {}
        self.cycles = 0
        """Cycles whose decisions were stored."""

    def add_job(
        self, spec: JobSpec, *, actor: str, now: float, audit: AuditEntry | None = None
    ) -> JobView:
        if spec.id in self.unfinished or spec.id in self.finished:
            raise DuplicateJob(f"job {spec.id} was already submitted")
        view = JobView(spec, history=(PhaseChange(now, JobPhase.PENDING, "submitted"),))
        self.unfinished[spec.id] = view
        if audit is not None:
            self.audit_rows.append(audit)
        return view

    def jobs(self, *, include_finished: bool = False) -> dict[JobId, JobView]:
        return {**self.unfinished, **self.finished} if include_finished else dict(self.unfinished)

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
            if view.phase.finished:
                self.unfinished.pop(view.id, None)
                self.finished[view.id] = view
            else:
                self.unfinished[view.id] = view
        if decisions is not None:
            self.cycles += 1


@dataclass
class _Run:
    attempt: int
    nodes: frozenset[str]


class SimulatedExecutor:
    """Runs gangs on the virtual clock: STARTED at once, EXITED after the job's run time with
    the exit code of that run (a job's ``exit_codes``: one per run that runs to its end, the
    last repeating), STOPPED ``stop_delay_s`` after a stop (never later than the grace
    period), NODE_LOST for a failed node's gangs."""

    capabilities = ExecutorCapabilities(
        "simulated", runs_real_processes=False, can_fail_nodes=True, captures_logs=False
    )

    def __init__(
        self,
        clock: VirtualClock,
        exit_codes: Mapping[JobId, tuple[int, ...]],
        stop_delay_s: float = 0.0,
    ) -> None:
        self.clock = clock
        self.exit_codes = exit_codes
        self.stop_delay_s = stop_delay_s
        self._runs: dict[JobId, _Run] = {}
        self._ended: dict[JobId, int] = {}
        """How many runs of each job ran to their end (and so which exit code is next)."""
        self._due: list[tuple[float, int, ExecutorEvent]] = []
        self._made = 0

    def _report(self, at_s: float, event: ExecutorEvent) -> None:
        heapq.heappush(self._due, (at_s, self._made, event))
        self._made += 1

    def next_at(self) -> float | None:
        """When the next report is due (None: none)."""
        return self._due[0][0] if self._due else None

    def start(self, launch: GangLaunch) -> None:
        job, now = launch.job.id, self.clock()
        self._runs[job] = _Run(launch.attempt, frozenset(launch.allocation.resources_on_node))
        self._report(now, ExecutorEvent(ExecutorEventKind.STARTED, now, job, launch.attempt))
        codes = self.exit_codes.get(job, (0,))
        code = codes[min(self._ended.get(job, 0), len(codes) - 1)]
        ends = now + (launch.job.runtime_s or 0.0)
        exited = ExecutorEvent(ExecutorEventKind.EXITED, ends, job, launch.attempt, exit_code=code)
        self._report(ends, exited)

    def cancel(self, job: JobId) -> None:
        self._runs.pop(job, None)

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        for job in jobs:
            self.cancel(job)

    def stop(self, job: JobId, grace_s: float) -> None:
        run = self._runs.pop(job, None)
        at = self.clock() + min(self.stop_delay_s, grace_s)
        attempt = run.attempt if run is not None else 0
        self._report(at, ExecutorEvent(ExecutorEventKind.STOPPED, at, job, attempt))

    def poll(self) -> list[ExecutorEvent]:
        now, events = self.clock(), []
        while self._due and self._due[0][0] <= now:
            event = heapq.heappop(self._due)[2]
            if event.kind is ExecutorEventKind.STOPPED or event.kind is ExecutorEventKind.NODE_LOST:
                events.append(event)
                continue
            job = event.job
            run = self._runs.get(job) if job is not None else None
            if job is None or run is None or run.attempt != event.attempt:
                continue  # the run was stopped, cancelled or lost meanwhile
            if event.kind is ExecutorEventKind.EXITED:
                del self._runs[job]
                self._ended[job] = self._ended.get(job, 0) + 1
            events.append(event)
        return events

    def fail_node(self, node: str) -> None:
        now = self.clock()
        for job, run in list(self._runs.items()):
            if node in run.nodes:
                del self._runs[job]
        self._report(now, ExecutorEvent(ExecutorEventKind.NODE_LOST, now, node=node))

    def recover_node(self, node: str) -> None:
        """Nothing to undo: a node marked healthy takes gangs again."""

    def logs(self, job: JobId, pod: int | None = None) -> str:
        return ""

    def close(self) -> None:
        self._runs.clear()

    def inventory_changes(self) -> None:
        return None

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        return set()


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
    clock = VirtualClock()
    store = ReplayStore()
    store.save_nodes(scenario.nodes, actor=ACTOR, now=0.0)
    store.save_policy(scenario.policy, actor=ACTOR, now=0.0)
    exit_codes = {
        event.action.spec.id: event.action.exit_codes
        for event in scenario.events
        if isinstance(event.action, Submit)
    }
    executor = SimulatedExecutor(clock, exit_codes, scenario.stop_delay_s)
    controller = Controller(store, executor, scenario.topology, clock=clock)
    pending = list(reversed(scenario.events))  # popped from the end: the earliest first
    steps = 0
    while True:
        due = [
            at
            for at in (
                pending[-1].at_s if pending else None,
                executor.next_at(),
                _time_rule(controller, store, clock.now),
            )
            if at is not None
        ]
        if not due:
            break
        at = max(min(due), clock.now)
        if scenario.until_s is not None and at > scenario.until_s:
            break
        clock.now = at
        while pending and pending[-1].at_s <= at:
            _apply(controller, pending.pop())
        steps += _steps_until_settled(controller, executor, at)
    return ControlledRun(store.jobs(include_finished=True), steps, store.cycles)


def _steps_until_settled(controller: Controller, executor: SimulatedExecutor, at: float) -> int:
    """Step the controller at ``at`` until a step changes nothing and no report is due; the
    steps it took."""
    for steps in range(1, MAX_STEPS_PER_INSTANT + 1):
        report = controller.step()
        result = report.result
        moved = (
            report.events
            or report.timed_out
            or result.admissions
            or result.preemptions
            or result.requeues
            or result.cancellations
        )
        due = executor.next_at()
        if not moved and (due is None or due > at):
            return steps
    raise RuntimeError(f"the controller did not settle at t={at} s")


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


def _apply(controller: Controller, event: ScenarioEvent) -> None:
    """A scenario event as a user (or the cluster) makes it."""
    action, intake = event.action, controller.intake
    if isinstance(action, Submit):
        intake.submit(action.spec, actor=ACTOR)
    elif isinstance(action, Cancel):
        job = controller.store.job(action.job)
        if not job.phase.finished:
            intake.cancel(action.job, actor=ACTOR)
    elif isinstance(action, Hold | Release):
        intake.set_held(action.job, isinstance(action, Hold), actor=ACTOR)
    else:
        intake.mark_node(str(action.node), ready=not isinstance(action, FailNode), actor=ACTOR)
