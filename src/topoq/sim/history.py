"""Recorded history as simulator input (``topoq whatif``; docs/simulate.md, "What-if on recorded
history"): the jobs a topoq server recorded over a window, read from its database, turned into
a scenario that replays them through the same core under the policy then in force or under a
changed one, and into the decision log of what really happened, so that one table and one
report show the three side by side.

What is read, all through ``SqlStore``'s public reads (the database is opened without
migrating it, and nothing is written):

- **The jobs** submitted in ``[since, until)`` (``jobs_submitted_between``): their specs,
  teams, submission times and phase histories; and the window's phase events
  (``job_events_between``), whose admissions carry the flavor and GPUs each run booked.
- **The cluster**: the nodes stored now, every one taken as healthy and schedulable for the
  whole window; the topology levels as given, else the AWS network layers the nodes' labels
  carry (and the UltraServer), then the hostname.
- **The policy in force at since**: the latest version set at or before it
  (``policy_versions``); the first version when none was (said as a warning).

The assumptions of the replay, each also in docs/simulate.md:

- A job is submitted at its recorded submission time (seconds after ``since``), with its
  recorded spec (team, pods, priority, retries, time limit).
- **Run time**: the length of its last run that ended by itself — every pod exited, 0 or not
  — from the moment it was recorded running. A run starts over from the beginning on each
  attempt, as in the simulator. A job with no such run (still running or waiting at
  ``until``, cancelled, preempted and not run again, stopped at its time limit) runs past the
  window's end: the window's length.
- **Exit codes**: each run that ended by itself gives its exit code, in order (success 0,
  ``a pod exited N`` N), so that retries and failures happen again; none recorded: 0.
- A user's cancel is replayed at its recorded time; the scheduler's own cancels (a broken
  dependency) are decided again. A dependency on a job submitted before the window is taken
  as met.
- A preempted job stops after the mean of the recorded stops (preempting to back in the
  queue) in the window; 0 when none was recorded.
- A cycle runs at each arrival and end, as in every simulation, and every
  ``REPLAY_TICK_S`` while jobs wait (the server steps every half second; the time-based
  rules — the starvation guard, fair-share decay — are looked at once a minute).
- **Not replayed**: jobs submitted before ``since`` (capacity they held at ``since`` is free
  in the replays: a warning counts them), holds and releases, node failures, cordons and
  inventory changes, policy versions set inside the window (a warning names them), and the
  teams' fair-share usage before ``since`` (the replays start with none).

The recorded figures are worked out from the same kind of decision log a simulation writes
(:func:`recorded_result`): a wait is from submission to the first time the job was recorded
running, GPU-hours count from each run's start to its end, as the simulator counts them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.exc import DBAPIError

from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import Allocation, JobId, JobPhase, JobSpec, JobView, PhaseChange
from topoq.domain.node import HOSTNAME_LABEL, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.topology import AWS_NETWORK_LAYER_LABELS, AWS_ULTRASERVER_LABEL, TopologySpec
from topoq.engine.ports import StoreUnavailable
from topoq.sim.engine import LeftPending, SimulationResult
from topoq.sim.events import Cancel, ScenarioEvent
from topoq.sim.log import Decision, LogEntry, Outcome, allocation_gpus
from topoq.sim.scenario import Scenario
from topoq.sim.submission import Submit
from topoq.sim.summary import summarize
from topoq.store.codec import decode_allocation, decode_history, decode_job_spec, decode_node
from topoq.store.database import connect, resolve_url
from topoq.store.errors import first_line
from topoq.store.records import MAX_WINDOW_JOBS, JobEvent, PolicyVersion
from topoq.store.sql_store import SqlStore

if TYPE_CHECKING:
    from topoq.wire.v1 import RecordedWindowModel

REPLAY_TICK_S = 60.0
"""How often a replay runs a cycle while jobs wait, beside its arrivals and ends."""
DATABASE_HINT = (
    "give the URL of a topoq server's database: sqlite:///DATA_DIR/topoq.db, or "
    "postgresql://USER@HOST/DATABASE"
)
EXITED = re.compile(r"a pod exited (-?\d+)")
"""How ``topoq.engine.outcomes`` records a run that ended with a pod's non-zero exit code."""
USER_CANCEL = "cancelled by "
"""How ``topoq.engine.intake`` records a user's cancel (a cycle's cancel says why instead)."""


@dataclass(frozen=True)
class Window:
    """``[since_s, until_s)`` in seconds since the epoch."""

    since_s: float
    until_s: float

    def __post_init__(self) -> None:
        if self.until_s <= self.since_s:
            raise InvalidInputError(
                f"--until ({utc(self.until_s)}) is not after --since ({utc(self.since_s)})",
                hint="give a window that ends after it starts",
            )

    @property
    def length_s(self) -> float:
        return self.until_s - self.since_s


@dataclass(frozen=True)
class RecordedHistory:
    """What a server recorded over a window, and what it ran on."""

    source: str
    """The database (its URL, password hidden)."""
    window: Window
    jobs: tuple[JobView, ...]
    """Submitted in the window, oldest first, each with its whole history."""
    booked: Mapping[tuple[JobId, int], Allocation]
    """What each admission in the window booked, by (job, index of the entry in its
    history)."""
    nodes: tuple[NodeSpec, ...]
    topology: TopologySpec
    policy: ClusterPolicy
    policy_version: PolicyVersion
    """The version in force at the window's start."""
    warnings: tuple[str, ...] = ()

    @property
    def teams(self) -> list[TeamName]:
        """The teams that submitted jobs in the window, by name."""
        return sorted({job.team for job in self.jobs})


def utc(seconds: float) -> str:
    """``2024-05-01T09:00:00Z``."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# --- reading ----------------------------------------------------------------------------
def open_recorded_store(url: str) -> SqlStore:
    """The store of a server's database, opened to read: not migrated, and a SQLite file that
    is not there is refused rather than made."""
    resolved = resolve_url(url, Path.cwd())
    if resolved.get_backend_name() == "sqlite" and not Path(str(resolved.database)).is_file():
        raise InvalidInputError(
            f"no database file {resolved.database}", where="--database", hint=DATABASE_HINT
        )
    return SqlStore(connect(resolved))


@contextmanager
def _readable(source: str) -> Iterator[None]:
    """A database that cannot be read as topoq's (not a database, no topoq tables, away) is
    bad input, said in one line with the database it is."""
    try:
        yield
    except StoreUnavailable as error:
        raise InvalidInputError(str(error), hint=DATABASE_HINT) from None
    except DBAPIError as error:
        raise InvalidInputError(
            f"cannot read topoq's history from {source}: {first_line(error)}", hint=DATABASE_HINT
        ) from None


class RecordedReads(Protocol):
    """The reads a what-if makes of what a server recorded: ``SqlStore``'s, or
    ``ServerRecords`` (the same, as a server's ``GET /reports/history`` answered them)."""

    def policy_versions(self) -> list[PolicyVersion]: ...

    def policy_at(self, version: int) -> ClusterPolicy | None: ...

    def count_jobs_submitted_between(self, start_s: float, end_s: float) -> int: ...

    def jobs_submitted_between(self, start_s: float, end_s: float) -> dict[JobId, JobView]: ...

    def job_events_between(
        self, start_s: float, end_s: float, *, holding_at_start: bool = False
    ) -> list[JobEvent]: ...

    def nodes(self) -> list[NodeSpec]: ...

    def submission_span(self) -> tuple[float, float] | None:
        """When the oldest and the newest job it holds were submitted (None: it holds none)."""


def read_history(
    store: RecordedReads, window: Window, *, levels: Sequence[str] = (), source: str | None = None
) -> RecordedHistory:
    """What ``store`` recorded over ``window``; ``levels``: the topology levels the server
    placed by (default: from the nodes' labels); ``source``: what to call it (default: the
    database's URL, password hidden)."""
    if source is None:
        assert isinstance(store, SqlStore)
        source = store.database.display_url
    with _readable(source):
        version, policy, policy_warnings = _policy_in_force(store, window, source)
        submitted = store.count_jobs_submitted_between(window.since_s, window.until_s)
        if submitted > MAX_WINDOW_JOBS:
            raise InvalidInputError(
                f"{submitted:,} jobs were submitted from {utc(window.since_s)} to "
                f"{utc(window.until_s)}; a what-if replays at most {MAX_WINDOW_JOBS:,}",
                where="--since/--until",
                hint="give a shorter window (a week of a busy cluster is plenty to compare "
                "policies), or several windows one after another",
            )
        jobs = store.jobs_submitted_between(window.since_s, window.until_s)
        if not jobs:
            raise InvalidInputError(
                f"no job was submitted from {utc(window.since_s)} to {utc(window.until_s)}",
                where=source,
                hint=_submissions_hint(store.submission_span()),
            )
        events = store.job_events_between(window.since_s, window.until_s)
        nodes = tuple(replace(n, ready=True, unschedulable=False) for n in store.nodes())
        held = store.job_events_between(window.since_s, window.since_s, holding_at_start=True)
    if not nodes:
        raise InvalidInputError(f"{source} holds no node", hint=DATABASE_HINT)
    topology = TopologySpec("recorded", tuple(levels) or levels_from_labels(nodes))
    warnings = [*policy_warnings]
    if held:
        warnings.append(
            f"{len({event.job for event in held})} job(s) submitted before --since held GPUs "
            "at it; they are not replayed, so the replays start on an emptier cluster"
        )
    return RecordedHistory(
        source=source,
        window=window,
        jobs=tuple(jobs.values()),
        booked={(e.job, e.seq): e.allocation for e in events if e.allocation is not None},
        nodes=nodes,
        topology=topology,
        policy=policy,
        policy_version=version,
        warnings=tuple(warnings),
    )


def _policy_in_force(
    store: RecordedReads, window: Window, source: str
) -> tuple[PolicyVersion, ClusterPolicy, list[str]]:
    """The version in force at the window's start, the policy, and warnings about versions
    that do not fit the window."""
    versions = store.policy_versions()
    if not versions:
        raise InvalidInputError(f"{source} holds no policy", hint=DATABASE_HINT)
    before = [v for v in versions if v.at_s <= window.since_s]
    chosen = before[-1] if before else versions[0]
    warnings = [
        f"policy version {v.version} was set at {utc(v.at_s)}, inside the window: the replays "
        f"use version {chosen.version} throughout"
        for v in versions
        if window.since_s < v.at_s < window.until_s and v is not chosen
    ]
    if not before:
        warnings.insert(
            0,
            f"no policy was in force at --since; the first, version {chosen.version} (set at "
            f"{utc(chosen.at_s)}), is replayed",
        )
    policy = store.policy_at(chosen.version)
    assert policy is not None  # a listed version is stored
    return chosen, policy, warnings


def _submissions_hint(span: tuple[float, float] | None) -> str:
    """Where the recorded jobs are in time, for a window that holds none."""
    if span is None:
        return "the server holds no job yet"
    first, last = span
    return f"its jobs were submitted from {utc(first)} to {utc(last)}: give a window among them"


class ServerRecords:
    """``RecordedReads`` of what a server answered ``GET /reports/history`` for one window
    (``recorded``: its answer, the store's documents in it), and the policy versions it keeps
    (``policy_at``: a version's policy, asked of the server)."""

    def __init__(
        self, recorded: RecordedWindowModel, policy_at: Callable[[int], ClusterPolicy | None]
    ) -> None:
        self._recorded = recorded
        self.policy_at = policy_at

    def policy_versions(self) -> list[PolicyVersion]:
        return [PolicyVersion(v.version, v.actor, v.at) for v in self._recorded.policy_versions]

    def count_jobs_submitted_between(self, start_s: float, end_s: float) -> int:
        return len(self._recorded.jobs)

    def jobs_submitted_between(self, start_s: float, end_s: float) -> dict[JobId, JobView]:
        views = (
            JobView(decode_job_spec(job["spec"]), history=decode_history(job["history"]))
            for job in self._recorded.jobs
        )
        return {view.id: view for view in views}

    def job_events_between(
        self, start_s: float, end_s: float, *, holding_at_start: bool = False
    ) -> list[JobEvent]:
        """The admissions' bookings (what ``read_history`` takes of the window's events), or
        with ``holding_at_start`` the jobs that held GPUs at the window's start."""
        if holding_at_start:
            return [_held(job) for job in self._recorded.held_at_start]
        return [
            JobEvent(
                JobId(entry["job"]),
                "",
                int(entry["seq"]),
                0.0,
                JobPhase.ADMITTED,
                "",
                decode_allocation(entry["allocation"]),
            )
            for entry in self._recorded.booked
        ]

    def nodes(self) -> list[NodeSpec]:
        return [decode_node(node) for node in self._recorded.nodes]

    def submission_span(self) -> tuple[float, float] | None:
        first, last = self._recorded.first_submitted, self._recorded.last_submitted
        return None if first is None or last is None else (first, last)


def _held(job: str) -> JobEvent:
    return JobEvent(JobId(job), "", 0, 0.0, JobPhase.RUNNING, "")


def levels_from_labels(nodes: Sequence[NodeSpec]) -> tuple[str, ...]:
    """The AWS network layers the nodes carry (and the UltraServer), then the hostname: the
    levels a server started on such nodes without other levels places by."""
    present = {label for node in nodes for label in node.labels}
    levels = [label for label in AWS_NETWORK_LAYER_LABELS if label in present]
    if AWS_ULTRASERVER_LABEL in present:
        levels.append(AWS_ULTRASERVER_LABEL)
    return (*levels, HOSTNAME_LABEL)


# --- the replay ---------------------------------------------------------------------------
def history_scenario(history: RecordedHistory, policy: ClusterPolicy, name: str) -> Scenario:
    """The recorded jobs as a scenario under ``policy``, from ``since`` (time 0) to ``until``."""
    since = history.window.since_s
    submitted = {job.id for job in history.jobs}
    events: list[ScenarioEvent] = []
    for job in history.jobs:
        where = f"job {job.id}"
        spec = replace(
            job.spec,
            submitted_at=job.spec.submitted_at - since,
            runtime_s=run_time_s(job, history.window),
            dependencies=tuple(d for d in job.spec.dependencies if d.job in submitted),
        )
        events.append(ScenarioEvent(spec.submitted_at, Submit(spec, exit_codes(job)), where))
        cancelled = user_cancel_s(job, history.window)
        if cancelled is not None:
            events.append(ScenarioEvent(cancelled - since, Cancel(job.id), where))
    return Scenario(
        name=name,
        source=history.source,
        nodes=history.nodes,
        topology=history.topology,
        policy=policy,
        events=tuple(sorted(events, key=lambda event: event.at_s)),
        cycle_interval_s=REPLAY_TICK_S,
        until_s=history.window.length_s,
        stop_delay_s=stop_delay_s(history),
    )


def runs(job: JobView) -> Iterator[tuple[PhaseChange, PhaseChange | None]]:
    """Each run of the job: the entry that recorded it running, and the one that ended it
    (None: it still runs)."""
    history = job.history
    for index, change in enumerate(history):
        if change.phase is JobPhase.RUNNING:
            yield change, history[index + 1] if index + 1 < len(history) else None


def _exit_code(end: PhaseChange | None) -> int | None:
    """The exit code a run ended with by itself (None: it was stopped, or still runs)."""
    if end is None:
        return None
    if end.phase is JobPhase.SUCCEEDED:
        return 0
    exited = EXITED.match(end.cause)
    return int(exited.group(1)) if exited else None


def run_time_s(job: JobView, window: Window) -> float:
    """Its last run that ended by itself within the window, else past the window's end."""
    ended = [
        end.at_s - start.at_s
        for start, end in runs(job)
        if end is not None and end.at_s < window.until_s and _exit_code(end) is not None
    ]
    return ended[-1] if ended else window.length_s


def exit_codes(job: JobView) -> tuple[int, ...]:
    """The exit code of each run that ended by itself, in order; ``(0,)`` when none did."""
    codes = tuple(code for _, end in runs(job) if (code := _exit_code(end)) is not None)
    return codes or (0,)


def user_cancel_s(job: JobView, window: Window) -> float | None:
    """When a user cancelled the job, if inside the window."""
    last = job.history[-1] if job.history else None
    if (
        last is not None
        and last.phase is JobPhase.CANCELLED
        and last.cause.startswith(USER_CANCEL)
        and last.at_s < window.until_s
    ):
        return last.at_s
    return None


def stop_delay_s(history: RecordedHistory) -> float:
    """The mean recorded time from a preemption to the victim back in the queue."""
    stops = [
        after.at_s - change.at_s
        for job in history.jobs
        for change, after in zip(job.history, job.history[1:], strict=False)
        if change.phase is JobPhase.PREEMPTING and after.at_s < history.window.until_s
    ]
    return sum(stops) / len(stops) if stops else 0.0


# --- what was recorded ----------------------------------------------------------------------
def recorded_result(history: RecordedHistory) -> SimulationResult:
    """What happened, as the result of a run: its decision log built from the recorded
    histories (times in seconds after ``since``), so that the comparison and the report
    work it out exactly as they do a replay's."""
    window = history.window
    entries = sorted(
        (entry for job in history.jobs for entry in _entries(job, history)),
        key=lambda entry: entry.t,
    )
    unfinished = [job for job in history.jobs if not _phase_at(job, window.until_s).finished]
    end_s = window.length_s if unfinished else max((e.t for e in entries), default=0.0)
    capacity = sum(node.allocatable.amount(NVIDIA_GPU) for node in history.nodes)
    summary = summarize(entries, history.policy, capacity_gpus=capacity, end_s=end_s)
    pending = tuple(
        LeftPending(job.id, job.team, None, None)
        for job in unfinished
        if _phase_at(job, window.until_s) is JobPhase.PENDING
    )
    running = tuple(
        job.id for job in unfinished if _phase_at(job, window.until_s) is JobPhase.RUNNING
    )
    return SimulationResult(
        "recorded", tuple(entries), summary, pending, running, end_s, 0, history.warnings
    )


def _phase_at(job: JobView, at_s: float) -> JobPhase:
    """The job's phase just before ``at_s``."""
    phase = JobPhase.PENDING
    for change in job.history:
        if change.at_s >= at_s:
            break
        phase = change.phase
    return phase


def _entries(job: JobView, history: RecordedHistory) -> Iterator[LogEntry]:
    """The decision log entries of one job's recorded history inside the window."""
    since, until = history.window.since_s, history.window.until_s
    gpus = workload_gpus(job.spec)
    yield LogEntry(job.spec.submitted_at - since, Decision.SUBMIT, job.id, job.team, gpus=gpus)
    flavor: str | None = None
    for index in range(1, len(job.history)):
        change = job.history[index]
        if change.at_s >= until:
            return
        decision = _decision(job.history[index - 1].phase, change.phase)
        entry = LogEntry(change.at_s - since, decision, job.id, job.team, message=change.cause)
        if decision is Decision.ADMIT:
            booked = history.booked.get((job.id, index))
            flavor, _, borrowed = allocation_gpus(booked) if booked else (None, gpus, 0)
            reason = Outcome.BORROWING if borrowed else Outcome.WITHIN_GUARANTEE
            entry = replace(entry, reason=reason.value, borrowed_gpus=borrowed)
        if decision in (Decision.ADMIT, Decision.START):
            entry = replace(entry, flavor=flavor, gpus=gpus)
        elif decision is Decision.FINISH:
            entry = replace(entry, reason=Outcome.SUCCEEDED.value)
        yield entry


RECORDED_DECISIONS = {
    JobPhase.ADMITTED: Decision.ADMIT,
    JobPhase.RUNNING: Decision.START,
    JobPhase.SUCCEEDED: Decision.FINISH,
    JobPhase.FAILED: Decision.FAIL,
    JobPhase.CANCELLED: Decision.CANCEL,
    JobPhase.PREEMPTING: Decision.PREEMPT,
}
"""The decision log's word for a recorded move into each phase but pending."""


def _decision(before: JobPhase, after: JobPhase) -> Decision:
    """What a recorded move is in a decision log. Back to pending is a victim that stopped,
    or a run requeued (a retry, a lost node: both end the run and queue the job again)."""
    if after is JobPhase.PENDING:
        return Decision.STOPPED if before is JobPhase.PREEMPTING else Decision.REQUEUE
    return RECORDED_DECISIONS[after]


def workload_gpus(spec: JobSpec) -> int | float:
    return spec.workload.gpus
