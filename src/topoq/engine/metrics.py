"""Prometheus metrics of the control plane (prometheus-client), fed by the controller.

Gauges describe the state after each step (jobs and GPUs per team and phase; guarantee,
borrowed and lent GPUs per team); counters and histograms accumulate what steps did
(admissions, preemptions by cause, cycle duration, how many domains of each level a placed
gang spans). The per-team tallies are kept across steps (``JobTally``): a step recounts only
the jobs that changed, not the whole queue."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client import Counter as PromCounter

from topoq.core.holdings import total_demand
from topoq.core.quota import QuotaBook
from topoq.domain.governance import TeamName
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE, gpus_held
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.domain.quantity import NVIDIA_GPU
from topoq.engine.controller import StepReport

SPAN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


GPU_STATES = {JobPhase.PENDING: "pending", JobPhase.PREEMPTING: "stopping"}
"""The ``state`` label of ``topoq_gpus`` by phase; any other phase holding GPUs: running."""


class JobTally:
    """Jobs per (team, phase) and GPUs per (team, GPU state), brought up to date with each
    step's jobs by recounting only those that are not the very objects counted before (the
    store hands out the same view for an unchanged job): 10,000 pending jobs cost a pass of
    identity checks, not 10,000 recounts."""

    def __init__(self) -> None:
        self._counted: dict[JobId, JobView] = {}
        self.jobs: Counter[tuple[TeamName, JobPhase]] = Counter()
        self.gpu_milli: Counter[tuple[TeamName, str]] = Counter()
        """GPUs per (team, GPU state) in thousandths: shares of a GPU counted exactly."""
        self.gpu_jobs: Counter[tuple[TeamName, str]] = Counter()
        """How many jobs count in each GPU tally (a tally of jobs without GPUs is shown too)."""

    def update(self, jobs: Mapping[JobId, JobView]) -> None:
        counted = self._counted
        for job_id, view in jobs.items():
            before = counted.get(job_id)
            if before is not view:
                if before is not None:
                    self._count(before, -1)
                self._count(view, 1)
        for job_id in counted.keys() - jobs.keys():
            self._count(counted[job_id], -1)
        self._counted = dict(jobs)

    def _count(self, job: JobView, sign: int) -> None:
        self.jobs[(job.team, job.phase)] += sign
        if job.phase is JobPhase.PENDING or job.phase.holds_capacity:
            state = (job.team, GPU_STATES.get(job.phase, "running"))
            demand = total_demand(job)
            self.gpu_milli[state] += sign * (
                demand.amount(NVIDIA_GPU) * GPU_MILLI_PER_GPU + demand.amount(GPU_SHARE)
            )
            self.gpu_jobs[state] += sign


class ControlPlaneMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.jobs = Gauge("topoq_jobs", "Jobs by team and phase", ["team", "phase"], registry=r)
        self.gpus = Gauge(
            "topoq_gpus",
            "GPUs requested by pending jobs, held by running ones and by victims stopping",
            ["team", "state"],
            registry=r,
        )
        self.quota = Gauge(
            "topoq_quota_gpus",
            "GPUs per team: guarantee, borrowed, lent",
            ["team", "kind"],
            registry=r,
        )
        self.admissions = PromCounter("topoq_admissions", "Jobs admitted", ["team"], registry=r)
        self.preemptions = PromCounter(
            "topoq_preemptions", "Jobs preempted, by cause", ["cause"], registry=r
        )
        self.cycle_seconds = Histogram(
            "topoq_cycle_duration_seconds", "Duration of one controller step", registry=r
        )
        self.steps = PromCounter(
            "topoq_steps",
            "Controller steps that decided, by how: a cycle, arrivals alone, nothing changed",
            ["decided_by"],
            registry=r,
        )
        self.span = Histogram(
            "topoq_placement_span_domains",
            "Domains of each level an admitted gang spans",
            ["level"],
            buckets=SPAN_BUCKETS,
            registry=r,
        )
        self.tally = JobTally()

    def observe_step(
        self, report: StepReport, duration_s: float, jobs: Mapping[JobId, JobView]
    ) -> None:
        self.cycle_seconds.observe(duration_s)
        self.steps.labels(decided_by=report.decided_by.value).inc()
        for admit in report.result.admissions:
            team = jobs[admit.job].team if admit.job in jobs else "unknown"
            self.admissions.labels(team=team).inc()
            for outcome in admit.allocation.placement.pod_sets:
                for level, count in outcome.span.items():
                    self.span.labels(level=level).observe(count)
        for preempt in report.result.preemptions:
            self.preemptions.labels(cause=preempt.cause.value).inc()

    def observe_state(self, jobs: Mapping[JobId, JobView], book: QuotaBook) -> None:
        self.jobs.clear()
        self.gpus.clear()
        self.quota.clear()
        tally = self.tally
        tally.update(jobs)
        for (team, phase), count in tally.jobs.items():
            if count:
                self.jobs.labels(team=team, phase=phase.value).set(count)
        for (team, state), milli in tally.gpu_milli.items():
            if tally.gpu_jobs[(team, state)]:
                self.gpus.labels(team=team, state=state).set(milli / GPU_MILLI_PER_GPU)
        for spec in book.policy.teams:
            for kind, amount in _quota_gpus(book, spec.name).items():
                self.quota.labels(team=spec.name, kind=kind).set(amount)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def publish(self, path: Path) -> None:
        """Write the exposition to ``path`` whole (a reader never sees half of it): the
        controller runs in its own process, and the API serves this file (``MetricsFile``)."""
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(self.exposition())
        partial.replace(path)


class MetricsSource(Protocol):
    """What ``GET /metrics`` serves."""

    def exposition(self) -> bytes: ...


@dataclass(frozen=True)
class MetricsFile:
    """The metrics the controller process last published (empty before its first step)."""

    path: Path

    def exposition(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""


def _quota_gpus(book: QuotaBook, team: TeamName) -> dict[str, float]:
    """The team's GPUs guaranteed, borrowed and lent, a share of a GPU as its part of one."""
    totals = {"guarantee": 0.0, "borrowed": 0.0, "lent": 0.0}
    for flavor in book.capacity:
        totals["guarantee"] += gpus_held(book.guarantee(team, flavor))
        totals["borrowed"] += gpus_held(book.borrowed(team, flavor))
        totals["lent"] += gpus_held(book.lent(team, flavor))
    return totals
