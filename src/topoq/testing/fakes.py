"""In-memory stand-ins for the engine's ports, for fast tests of the engine itself. The real
store (SQLite, PostgreSQL) and the local executor have their own contract tests."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from topoq.domain.decisions import CycleResult
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView, PhaseChange
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


class MemoryStore(MemoryRecords):
    """Keeps everything in dictionaries; same contract as the SQL store, no durability."""

    def __init__(self) -> None:
        super().__init__()
        self.job_rows: dict[JobId, JobView] = {}
        self.cycles: list[CycleResult] = []

    def add_job(
        self, spec: JobSpec, *, actor: str, now: float, audit: AuditEntry | None = None
    ) -> JobView:
        if spec.id in self.job_rows:
            raise DuplicateJob(f"job {spec.id} was already submitted")
        view = JobView(spec, history=(PhaseChange(now, JobView(spec).phase, "submitted"),))
        self.job_rows[spec.id] = view
        if audit is not None:
            self.audit_rows.append(audit)
        return view

    def jobs(self, *, include_finished: bool = False) -> dict[JobId, JobView]:
        return {k: v for k, v in self.job_rows.items() if include_finished or not v.phase.finished}

    def holding_jobs(self) -> dict[JobId, JobView]:
        return {k: v for k, v in self.job_rows.items() if v.phase.holds_capacity}

    def job(self, job_id: JobId) -> JobView:
        if job_id not in self.job_rows:
            raise UnknownJob(f"no job {job_id}")
        return self.job_rows[job_id]

    def phases_of(self, ids: Collection[JobId]) -> dict[JobId, JobPhase]:
        return {job: self.job_rows[job].phase for job in ids if job in self.job_rows}

    def save_jobs(
        self, changed: Sequence[JobView], *, now: float, decisions: CycleResult | None = None
    ) -> None:
        for view in changed:
            self.job_rows[view.id] = view
        if decisions is not None:
            self.cycles.append(decisions)


@dataclass
class ScriptedExecutor:
    """Records what it is asked to do; the test decides what happens (``report``)."""

    capabilities: ExecutorCapabilities = field(
        default_factory=lambda: ExecutorCapabilities("scripted", False, True, False)
    )
    launches: list[GangLaunch] = field(default_factory=list)
    cancelled: list[JobId] = field(default_factory=list)
    stopping: list[tuple[JobId, float]] = field(default_factory=list)
    """Every ``stop`` asked: (job, grace period); the test reports STOPPED when it likes."""
    failed_nodes: list[str] = field(default_factory=list)
    recovered_nodes: list[str] = field(default_factory=list)
    pending: list[ExecutorEvent] = field(default_factory=list)

    def start(self, launch: GangLaunch) -> None:
        self.launches.append(launch)

    def cancel(self, job: JobId) -> None:
        self.cancelled.append(job)

    def cancel_all(self, jobs: Sequence[JobId]) -> None:
        self.cancelled.extend(jobs)

    def stop(self, job: JobId, grace_s: float) -> None:
        self.stopping.append((job, grace_s))

    def poll(self) -> list[ExecutorEvent]:
        events, self.pending = self.pending, []
        return events

    def recover_node(self, node: str) -> None:
        self.recovered_nodes.append(node)

    def fail_node(self, node: str) -> None:
        self.failed_nodes.append(node)
        affected = {
            launch.job.id: launch.attempt
            for launch in self.launches
            if node in launch.allocation.nodes
        }
        self.pending.extend(
            ExecutorEvent(ExecutorEventKind.NODE_LOST, 0.0, job=job, attempt=attempt, node=node)
            for job, attempt in affected.items()
        )
        self.pending.append(ExecutorEvent(ExecutorEventKind.NODE_LOST, 0.0, node=node))

    def report(
        self, kind: ExecutorEventKind, job: str, *, exit_code: int | None = None, at: float = 0.0
    ) -> None:
        attempt = max((x.attempt for x in self.launches if x.job.id == job), default=0)
        self.pending.append(
            ExecutorEvent(kind, at, job=JobId(job), attempt=attempt, exit_code=exit_code)
        )

    def logs(self, job: JobId, pod: int | None = None) -> str:
        return ""

    def inventory_changes(self) -> None:
        return None

    def adopt(self, holding: Mapping[JobId, int]) -> set[JobId]:
        return set()

    def close(self) -> None:
        return None
