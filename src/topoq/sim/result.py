"""What a simulated run reports (``topoq simulate``, ``topoq whatif``, the comparisons): its
decision log, summary, the jobs left waiting or running, and where it ended."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from topoq.domain.governance import TeamName
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.node import NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.workload import PodSetSpec
from topoq.sim.eta_error import EtaError, eta_error
from topoq.sim.log import DecisionLog, LogEntry, json_lines
from topoq.sim.scenario import Scenario
from topoq.sim.summary import Summary, summarize

Progress = Callable[[float, int], None]
"""Told the simulated time and the cycles run so far."""
PROGRESS_EVERY_CYCLES = 200


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
