"""The order pending jobs are considered in, and the order victims are chosen in."""

from __future__ import annotations

from collections.abc import Iterable

from topoq.core.admission import flavors_for
from topoq.core.holdings import total_demand
from topoq.core.quota import QuotaBook, QuotaVerdict, dominant_share
from topoq.domain.governance import ClusterPolicy, IdleAllocation, Prioritization
from topoq.domain.job import JobView


def priority_of(policy: ClusterPolicy, job: JobView) -> int:
    """The job's class weight when prioritization is by priority; all equal under fifo."""
    if policy.prioritization is Prioritization.FIFO:
        return 0
    return policy.priority_of(job.spec.priority_class)


def order_pending(jobs: Iterable[JobView], book: QuotaBook) -> list[JobView]:
    """Jobs that fit their team's guarantee first (a guarantee is honoured before anyone
    borrows), then by priority, then by the team's fair-share position (lowest weighted
    borrowed share first, when idle compute is shared fairly), then by submission time."""
    policy = book.policy
    fair = policy.idle_allocation is IdleAllocation.FAIR_SHARE

    def key(job: JobView) -> tuple[int, int, float, float, str]:
        demand = total_demand(job)
        within = any(
            book.check(job.team, flavor, demand).verdict is QuotaVerdict.WITHIN_GUARANTEE
            for flavor in flavors_for(job, book)
        )
        share = dominant_share(book, job.team) if fair else 0.0
        return (0 if within else 1, -priority_of(policy, job), share, job.spec.submitted_at, job.id)

    return sorted(jobs, key=key)


def team_order_key(policy: ClusterPolicy, job: JobView) -> tuple[int, float, str]:
    """A team's own queue order: priority, then submission time."""
    return (-priority_of(policy, job), job.spec.submitted_at, job.id)


def eviction_order(policy: ClusterPolicy, jobs: Iterable[JobView]) -> list[JobView]:
    """Lowest priority first, then the most recently started (least work lost)."""
    return sorted(
        jobs,
        key=lambda job: (
            priority_of(policy, job),
            -(job.started_at or job.admitted_at or 0.0),
            job.id,
        ),
    )
