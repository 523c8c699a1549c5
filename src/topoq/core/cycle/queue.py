"""The queue as the next cycle would take it: ``queue_order(snapshot)``, the ready pending
jobs in the order their turns would come if none of them were admitted (``topoq queue``,
the dashboard's queue). It is the cycle's own order (``ordering.pending_in_line``) on the
books as they stand: jobs that fit their team's guarantee first, then priority, the teams'
fair-share positions, submission. An admission moves its team back in the order, so behind a
job that fits now the order is what it would be if that job still waited."""

from __future__ import annotations

from topoq.core.cycle.by_phase import JobsByPhase
from topoq.core.cycle.snapshot import Snapshot
from topoq.core.dependencies import resolve_dependencies
from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.ordering import line_up, order_facts, pending_in_line
from topoq.core.quota import QuotaBook
from topoq.domain.job import JobId


def queue_order(snapshot: Snapshot) -> list[JobId]:
    """The ready pending jobs (neither held by a user nor waiting on another job), the next
    to be considered first."""
    policy = snapshot.policy
    jobs = JobsByPhase(snapshot.jobs)
    blocked = resolve_dependencies(
        snapshot.jobs, snapshot.upstream_phases, dependents=jobs.dependents
    ).blocked
    ready = [job for job in jobs.ready if job.id not in blocked]
    book = QuotaBook(
        policy,
        capacity_by_flavor(snapshot.tree, snapshot.flavor_label),
        usage_by_team(jobs.holding.values()),
    )
    lineup = line_up(
        ready,
        lambda job: order_facts(policy, job),
        guard_s=policy.starvation_guard_s,
        now=snapshot.now,
    )
    unchanged = 0  # nothing is admitted: the books never change
    in_line = pending_in_line(lineup, book, snapshot.fair_share_usage, lambda: unchanged)
    return [job.id for _, job in in_line]
