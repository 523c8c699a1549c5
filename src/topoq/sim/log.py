"""The decision log: one entry per thing that happened to a job or a node, as JSON lines.

Each line is an object::

    {"t": 600, "job": "v1", "team": "vision", "decision": "admit",
     "placement": {"topology.k8s.aws/network-node-layer-2": ["l2-01-01"], ...},
     "span": {"topology.k8s.aws/network-node-layer-2": 1, ...},
     "flavor": "p5.48xlarge", "gpus": 32, "borrowed_gpus": 0, "reason": "WITHIN_GUARANTEE"}

Decisions: submit, admit (with the placement and its span per level, and under the cost
model ``best_span``, the fewest domains per level the free capacity allowed), start (under the
cost model with ``slowdown``, the pace it starts at), wait (only when
the job's reason or ETA changes; with ``victims`` when it waits for preemptions, ``eta`` when
its expected start can be computed), preempt (``for``
names the preemptor), requeue, cancel, finish, retry, fail, hold, release, node_failed and
node_recovered (with ``node``). Under the cost model a finish has ``slowdown``: its run's
length over the trace's. ``reason`` is a code (the core's pending reasons and preemption
causes, or :class:`Outcome`), ``message`` the human text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from itertools import compress
from operator import not_
from typing import Any

from topoq.core.eta import ETA_KEY
from topoq.core.tree import natural_key
from topoq.domain.decisions import CycleResult, Diagnostic, PendingReason
from topoq.domain.governance import TeamName
from topoq.domain.gpu_share import gpu_number, gpus_held
from topoq.domain.job import Allocation, FailureReason, JobId, JobPhase, JobView
from topoq.domain.quantity import NVIDIA_GPU


class Decision(StrEnum):
    SUBMIT = "submit"
    ADMIT = "admit"
    START = "start"
    WAIT = "wait"
    PREEMPT = "preempt"
    STOPPED = "stopped"
    """A victim's pods are gone (``stop_delay_s`` after its preemption); it is requeued."""
    REQUEUE = "requeue"
    CANCEL = "cancel"
    FINISH = "finish"
    RETRY = "retry"
    FAIL = "fail"
    HOLD = "hold"
    RELEASE = "release"
    NODE_FAILED = "node_failed"
    NODE_RECOVERED = "node_recovered"


STOPS_A_RUN = frozenset(
    {
        Decision.STOPPED,
        Decision.REQUEUE,
        Decision.CANCEL,
        Decision.FINISH,
        Decision.RETRY,
        Decision.FAIL,
    }
)
"""Decisions that end a running job's run (a cancel only when the job was running). A
preempted job runs (and holds its GPUs) until it stopped."""
JOINS_THE_QUEUE = frozenset({Decision.SUBMIT, Decision.STOPPED, Decision.REQUEUE, Decision.RETRY})
"""A job waits from its submission, and again once a preempted run stopped, a run was
requeued or a failed run is to be retried."""
LEAVES_THE_QUEUE = frozenset({Decision.START, Decision.CANCEL, Decision.FAIL, Decision.FINISH})


class Outcome(StrEnum):
    """Reason codes the simulator adds beside the core's."""

    WITHIN_GUARANTEE = "WITHIN_GUARANTEE"
    BORROWING = "BORROWING"
    SUCCEEDED = "SUCCEEDED"
    EXIT_CODE = "EXIT_CODE"
    CANCELLED_BY_USER = "CANCELLED_BY_USER"
    DEPENDENCY_UNSATISFIABLE = "DEPENDENCY_UNSATISFIABLE"
    ALREADY_FINISHED = "ALREADY_FINISHED"


@dataclass(frozen=True)
class LogEntry:
    t: float
    decision: Decision
    job: JobId | None = None
    team: TeamName | None = None
    reason: str | None = None
    message: str | None = None
    placement: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    flavor: str | None = None
    gpus: int | float | None = None
    """GPUs: whole, or with shares of one a decimal (1.5)."""
    borrowed_gpus: int | float | None = None
    victims: tuple[JobId, ...] = ()
    for_job: JobId | None = None
    node: str | None = None
    eta: float | None = None
    """A waiting job's expected start (``topoq.core.eta``), when one can be computed."""
    slowdown: float | None = None
    """Under the cost model: on a start, how many times as long as its trace says the run
    would take at the pace it starts at; on a finish, how many times as long it took."""
    best_span: Mapping[str, int] = field(default_factory=dict)
    """Under the cost model, on an admission: per level, the fewest domains the free capacity
    of that moment allowed (``network.fewest_domains``), beside ``span``."""
    gpus_on_nodes: Mapping[str, int] = field(default_factory=dict)
    """On an admission: the GPUs the gang holds on each node, by node name. Not in the JSON
    line (``placement`` names the nodes): the run's figures read it (fragmentation)."""

    def document(self) -> dict[str, Any]:
        """The JSON object of the entry; absent fields are left out."""
        values: dict[str, Any] = {
            "t": int(self.t) if float(self.t).is_integer() else self.t,
            "job": self.job,
            "team": self.team,
            "decision": self.decision.value,
            "node": self.node,
            "placement": {level: list(names) for level, names in self.placement.items()},
            "span": {level: len(names) for level, names in self.placement.items()},
            "flavor": self.flavor,
            "gpus": self.gpus,
            "borrowed_gpus": self.borrowed_gpus,
            "reason": self.reason,
            "message": self.message,
            "victims": list(self.victims),
            "for": self.for_job,
            "eta": self.eta,
            "slowdown": None if self.slowdown is None else round(self.slowdown, 6),
            "best_span": dict(self.best_span),
        }
        return {key: value for key, value in values.items() if value not in (None, {}, [])}


def json_lines(entries: Iterable[LogEntry]) -> Iterator[str]:
    for entry in entries:
        yield json.dumps(entry.document())


@dataclass(frozen=True)
class StartCost:
    """How an admitted job starts under the cost model (``topoq.sim.network``)."""

    slowdown: float
    best_span: Mapping[str, int]


class DecisionLog:
    """Collects entries; logs a waiting job again only when its reason or ETA changes."""

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.last_waits: dict[JobId, Diagnostic] = {}
        """Each job's last diagnostic since it was last admitted: what a report of the jobs
        left pending says."""
        self._waiting: dict[JobId, Diagnostic] = {}
        """The last diagnostic of each waiting job whose wait entry says what it says (none
        once another entry for the job was logged): also the job's ``last_waits``."""
        self._unchanged: set[int] = set()
        """The ``id``s of ``_waiting``'s diagnostics that a cycle handing the very same one
        back leaves unlogged (all but waits for victims, logged every cycle): the objects are
        kept by ``_waiting``, so an id stays theirs while it is here."""

    def add(self, entry: LogEntry) -> None:
        self.entries.append(entry)
        if entry.job is not None and entry.decision is not Decision.WAIT:
            self._forget_wait(entry.job)

    def run_ended(
        self,
        now: float,
        job: JobView,
        phase: JobPhase,
        cause: str,
        slowdown: float | None = None,
    ) -> None:
        """A run that ran to its end, as its exit code moved the job to ``phase`` (``cause``:
        the move's): finished, retried or failed."""
        if phase is JobPhase.SUCCEEDED:
            reason = Outcome.SUCCEEDED.value
            self.add(LogEntry(now, Decision.FINISH, job.id, job.team, reason, slowdown=slowdown))
            return
        decision = Decision.RETRY if phase is JobPhase.PENDING else Decision.FAIL
        reason = Outcome.EXIT_CODE.value
        self.add(LogEntry(now, decision, job.id, job.team, reason, cause, slowdown=slowdown))

    def timed_out(self, now: float, job: JobView, cause: str | None) -> None:
        """A running job failed at its time limit."""
        reason = FailureReason.TIME_LIMIT_REACHED.value
        self.add(LogEntry(now, Decision.FAIL, job.id, job.team, reason, cause))

    def victim_stopped(self, now: float, job: JobView, cause: str) -> None:
        """A victim's pods are gone and it is requeued (``cause``: its move's)."""
        self.add(LogEntry(now, Decision.STOPPED, job.id, job.team, message=cause))

    def _remember_wait(self, diagnostic: Diagnostic) -> None:
        self._forget_wait(diagnostic.job)
        self._waiting[diagnostic.job] = diagnostic
        if diagnostic.reason is not PendingReason.WAITING_FOR_VICTIMS:
            self._unchanged.add(id(diagnostic))

    def _forget_wait(self, job: JobId) -> None:
        before = self._waiting.pop(job, None)
        if before is not None:
            self._unchanged.discard(id(before))

    def cycle(
        self,
        now: float,
        result: CycleResult,
        jobs: Mapping[JobId, JobView],
        costs: Mapping[JobId, StartCost] | None = None,
    ) -> None:
        """Entries for one cycle's decisions; ``jobs`` as the cycle saw them; ``costs``: how
        each admitted job starts under the cost model."""

        def team(job: JobId) -> TeamName:
            return jobs[job].team

        for requeue in result.requeues:
            entry = LogEntry(now, Decision.REQUEUE, requeue.job, team(requeue.job))
            self.add(replace(entry, reason=requeue.cause.value, message=requeue.message))
        for cancel in result.cancellations:
            entry = LogEntry(now, Decision.CANCEL, cancel.job, team(cancel.job))
            reason = Outcome.DEPENDENCY_UNSATISFIABLE.value
            self.add(replace(entry, reason=reason, message=cancel.message))
        for preempt in result.preemptions:
            entry = LogEntry(now, Decision.PREEMPT, preempt.victim, team(preempt.victim))
            self.add(
                replace(
                    entry,
                    reason=preempt.cause.value,
                    message=preempt.message,
                    for_job=preempt.for_job,
                )
            )
        for admit in result.admissions:
            cost = costs.get(admit.job) if costs else None
            self._admitted(now, jobs[admit.job], admit.allocation, cost)
        victims: dict[JobId, list[JobId]] = {}
        for preempt in result.preemptions:
            victims.setdefault(preempt.for_job, []).append(preempt.victim)
        waiting, diagnostics = self._waiting, result.diagnostics
        # A cycle hands back the very same diagnostic for a job whose wait did not change, as
        # for most waiting jobs every cycle: those are told apart by their ids, in C
        changed = compress(
            diagnostics, map(not_, map(self._unchanged.__contains__, map(id, diagnostics)))
        )
        for diagnostic in changed:
            logged = waiting.get(diagnostic.job)
            self.last_waits[diagnostic.job] = diagnostic
            if logged is not None and _says_the_same(logged, diagnostic):
                self._remember_wait(diagnostic)
            else:
                self._wait(
                    now, diagnostic, team(diagnostic.job), tuple(victims.get(diagnostic.job, ()))
                )

    def _admitted(
        self, now: float, job: JobView, allocation: Allocation, cost: StartCost | None
    ) -> None:
        self.last_waits.pop(job.id, None)
        flavor, gpus, borrowed = allocation_gpus(allocation)
        reason = Outcome.BORROWING if borrowed else Outcome.WITHIN_GUARANTEE
        self.add(
            LogEntry(
                now,
                Decision.ADMIT,
                job.id,
                job.team,
                reason.value,
                placement=placement_of(allocation),
                flavor=flavor,
                gpus=gpus,
                borrowed_gpus=borrowed,
                best_span=cost.best_span if cost else {},
                gpus_on_nodes={
                    node: resources.amount(NVIDIA_GPU)
                    for node, resources in allocation.resources_on_node.items()
                },
            )
        )
        slowdown = cost.slowdown if cost else None
        self.add(
            LogEntry(
                now, Decision.START, job.id, job.team, flavor=flavor, gpus=gpus, slowdown=slowdown
            )
        )

    def _wait(
        self, now: float, diagnostic: Diagnostic, team: TeamName, victims: tuple[JobId, ...]
    ) -> None:
        reason, eta = _said(diagnostic)
        self.add(
            LogEntry(
                now,
                Decision.WAIT,
                diagnostic.job,
                team,
                reason,
                diagnostic.message,
                victims=victims,
                eta=eta,
            )
        )
        self._remember_wait(diagnostic)


def cancel_entry(now: float, job: JobView) -> LogEntry:
    """The entry of a user's cancel of ``job`` as it stands (a job that ended already has
    nothing to cancel)."""
    entry = LogEntry(now, Decision.CANCEL, job.id, job.team)
    if job.phase.finished:
        message = f"the job already ended ({job.phase.value}); nothing to cancel"
        return replace(entry, reason=Outcome.ALREADY_FINISHED.value, message=message)
    cancelled = Outcome.CANCELLED_BY_USER.value
    return replace(entry, reason=cancelled, message="cancelled by the user")


def _says_the_same(logged: Diagnostic, diagnostic: Diagnostic) -> bool:
    """Whether ``diagnostic``'s wait entry would say what ``logged``'s does (a job waiting
    for victims is logged every cycle): the same reason, then the same ETA (the same values,
    else the same once read as :func:`_eta`)."""
    if (
        diagnostic.reason is PendingReason.WAITING_FOR_VICTIMS
        or logged.reason is not diagnostic.reason
    ):
        return False
    before, after = logged.numbers.get(ETA_KEY), diagnostic.numbers.get(ETA_KEY)
    return before == after or _eta(before) == _eta(after)


def _said(diagnostic: Diagnostic) -> tuple[str, float | None]:
    """What a wait entry says: the reason and the ETA."""
    return diagnostic.reason.value, _eta(diagnostic.numbers.get(ETA_KEY))


def _eta(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def allocation_gpus(allocation: Allocation) -> tuple[str | None, int | float, int | float]:
    """(flavor, GPUs held, GPUs of them borrowed) of an admission; shares of a GPU count as
    their part of one."""
    flavor = next(iter(sorted(allocation.usage)), None)
    gpus = sum((gpus_held(amount) for amount in allocation.usage.values()), 0.0)
    borrowed = sum((gpus_held(amount) for amount in allocation.borrowed.values()), 0.0)
    return flavor, gpu_number(gpus), gpu_number(borrowed)


def placement_of(allocation: Allocation) -> dict[str, tuple[str, ...]]:
    """The domains the gang uses, per level label (highest level first)."""
    domains: dict[str, set[str]] = {}
    for outcome in allocation.placement.pod_sets:
        for assignment in outcome.assignments:
            for label, value in assignment.domain.items():
                domains.setdefault(label, set()).add(value)
    return {label: tuple(sorted(values, key=natural_key)) for label, values in domains.items()}
