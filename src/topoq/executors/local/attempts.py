"""What the local executor keeps about the gangs it runs: each attempt's pods, their GPUs and
processes, and where the attempt's files are."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from topoq.domain.job import JobId
from topoq.executors.environment import PodPlan
from topoq.executors.local.log_marks import MarkBook
from topoq.executors.local.processes import PodProcess


@dataclass
class RunningPod:
    """One pod of an attempt: its plan, its GPUs and, once spawned, its process."""

    plan: PodPlan
    gpu_indices: tuple[int, ...]
    process: PodProcess | None = None
    exit_code: int | None = None
    log_book: MarkBook | None = None
    """When its output was written and how far its log was rotated, once it was tended."""

    def describe(self) -> str:
        return f"pod {self.plan.rank} ({self.plan.pod_set} on {self.plan.node})"


@dataclass
class RunningAttempt:
    """An attempt of a gang that this executor started and has not ended."""

    job: JobId
    team: str
    number: int
    directory: Path
    marker: str
    """What the ``TOPOQ_POD`` marker of each of its pods starts with."""
    pods: list[RunningPod] = field(default_factory=list)

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(pod.plan.node for pod in self.pods)

    def running(self) -> list[PodProcess]:
        return [p.process for p in self.pods if p.process is not None and p.exit_code is None]
