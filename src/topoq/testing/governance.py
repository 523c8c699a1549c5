"""Builders for governance tests: GPU clusters with a flavor, teams, policies, jobs, and a
small loop that runs cycles and applies their decisions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from topoq.core.cycle import PlacementMode, Snapshot, schedule
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.governance import (
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    PreemptTeamTasks,
    Prioritization,
    PriorityClass,
    QueueingStrategy,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.job import Dependency, JobId, JobPhase, JobSpec, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL, NodeSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.topology import TopologySpec
from topoq.testing.builders import cluster, gpu_pods, workload

P5 = FlavorName("p5.48xlarge")


def gpu_cluster(
    shape: Sequence[int], flavor: str = P5, labels: Mapping[str, str] | None = None
) -> tuple[list[NodeSpec], TopologySpec]:
    """``cluster(shape)`` with every node labelled as instance type ``flavor`` (and with
    ``labels``)."""
    return cluster(shape, labels={INSTANCE_TYPE_LABEL: flavor} | dict(labels or {}))


def team(
    name: str,
    gpus: int = 0,
    *,
    flavor: str = P5,
    sharing: SharingStrategy = SharingStrategy.LEND_AND_BORROW,
    borrow_gpus: int | None = None,
    borrow_percent: int = 50,
    weight: int = 1,
    cohort: Sequence[str] = (),
    preempt: PreemptTeamTasks = PreemptTeamTasks.LOWER_PRIORITY,
    queueing: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
) -> TeamSpec:
    """A team guaranteed ``gpus`` GPUs of ``flavor``; it may borrow ``borrow_gpus`` (default:
    ``borrow_percent`` of the guarantee) when its strategy borrows."""
    limit = borrow_gpus if borrow_gpus is not None else gpus * borrow_percent // 100
    borrow = Resources({NVIDIA_GPU: limit}) if sharing.borrows else Resources()
    quota = FlavorQuota(
        FlavorName(flavor), Resources({NVIDIA_GPU: gpus}), borrow, covers=frozenset({NVIDIA_GPU})
    )
    return TeamSpec(TeamName(name), (quota,), sharing, weight, preempt, tuple(cohort), queueing)


def cohort(
    path: Sequence[str],
    gpus: int = 0,
    *,
    flavor: str = P5,
    borrow_gpus: int | None = None,
    lend_gpus: int | None = None,
    weight: int = 1,
) -> CohortSpec:
    """The cohort at ``path`` with its own guarantee of ``gpus`` GPUs of ``flavor``; its subtree
    may take ``borrow_gpus`` from outside it and lend ``lend_gpus`` (``None``: no limit)."""
    quota = CohortQuota(
        FlavorName(flavor),
        Resources({NVIDIA_GPU: gpus}),
        Resources({NVIDIA_GPU: borrow_gpus or 0}),
        Resources({NVIDIA_GPU: lend_gpus or 0}),
        borrow_limited=frozenset({NVIDIA_GPU}) if borrow_gpus is not None else frozenset(),
        lend_limited=frozenset({NVIDIA_GPU}) if lend_gpus is not None else frozenset(),
        covers=frozenset({NVIDIA_GPU}),
    )
    return CohortSpec(path[-1], tuple(path[:-1]), (quota,), weight)


def policy(
    *teams: TeamSpec,
    classes: Mapping[str, int] | None = None,
    fair_share: bool = False,
    fifo: bool = False,
    idle_sharing: bool = True,
    cohorts: Sequence[CohortSpec] = (),
) -> ClusterPolicy:
    return ClusterPolicy(
        teams=teams,
        prioritization=Prioritization.FIFO if fifo else Prioritization.PRIORITY,
        priority_classes=tuple(PriorityClass(n, w) for n, w in (classes or {}).items()),
        idle_allocation=IdleAllocation.FAIR_SHARE if fair_share else IdleAllocation.FIRST_COME,
        idle_resource_sharing=idle_sharing,
        cohorts=tuple(cohorts),
    )


def job(
    job_id: str,
    team_name: str,
    pods: int = 1,
    gpus: int = 8,
    *,
    priority: str | None = None,
    at: float = 0.0,
    depends: Iterable[Dependency] = (),
    runtime: float | None = None,
    max_retry: int = 0,
    time_limit: float | None = None,
    **topology: Any,
) -> JobView:
    pod_set = gpu_pods(pods, gpus=gpus, **topology)
    spec = JobSpec(
        JobId(job_id),
        TeamName(team_name),
        workload(pod_set, name=job_id),
        at,
        priority,
        tuple(depends),
        max_retry,
        runtime_s=runtime,
        time_limit_s=time_limit,
    )
    return JobView(spec)


@dataclass
class Cluster:
    """A little shell for tests: jobs, one tree, and cycles applied with instant start and
    eviction (as the simulator does)."""

    tree: TopologyTree
    policy: ClusterPolicy
    jobs: dict[JobId, JobView] = field(default_factory=dict)
    now: float = 0.0
    last: CycleResult = field(default_factory=CycleResult)
    fair_share_usage: dict[TeamName, float] = field(default_factory=dict)
    """Each team's decayed fair-share usage the cycles see (none unless a test sets it)."""
    placement: PlacementMode = PlacementMode.TOPOQ

    @classmethod
    def of(
        cls,
        shape: Sequence[int],
        policy: ClusterPolicy,
        *jobs: JobView,
        labels: Mapping[str, str] | None = None,
    ) -> Cluster:
        nodes, spec = gpu_cluster(shape, labels=labels)
        return cls(build_tree(nodes, spec), policy, {j.id: j for j in jobs})

    def submit(self, *jobs: JobView) -> None:
        for new in jobs:
            self.jobs[new.id] = replace(new, spec=replace(new.spec, submitted_at=self.now))

    def snapshot(self) -> Snapshot:
        """What a cycle would look at now."""
        return Snapshot(
            self.now,
            self.tree,
            tuple(self.jobs.values()),
            self.policy,
            fair_share_usage=self.fair_share_usage,
            placement=self.placement,
        )

    def cycle(self) -> CycleResult:
        self.last = schedule(self.snapshot())
        self.jobs = apply_cycle(
            self.jobs, self.last, now=self.now, start_at_once=True, evict_at_once=True
        )
        return self.last

    def finish(self, job_id: str, phase: JobPhase = JobPhase.SUCCEEDED) -> None:
        key = JobId(job_id)
        self.jobs[key] = advance(self.jobs[key], phase, now=self.now, cause="exited")

    def phase(self, job_id: str) -> JobPhase:
        return self.jobs[JobId(job_id)].phase

    def running(self) -> set[str]:
        return {j for j, v in self.jobs.items() if v.phase is JobPhase.RUNNING}

    def reason(self, job_id: str) -> str | None:
        for diagnostic in self.last.diagnostics:
            if diagnostic.job == job_id:
                return diagnostic.reason.value
        return None
