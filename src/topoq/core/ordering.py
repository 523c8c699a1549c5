"""The order pending jobs are considered in, and the order victims are chosen in."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType

from topoq.core.admission import flavors_for
from topoq.core.fair_share import fair_share_position
from topoq.core.holdings import total_demand
from topoq.core.quota import QuotaBook, cohort_shares
from topoq.domain.governance import ClusterPolicy, IdleAllocation, Prioritization, TeamName
from topoq.domain.job import JobView
from topoq.domain.resources import Resources

NO_USAGE: Mapping[TeamName, float] = MappingProxyType({})
"""No usage history: the fair-share position is the weighted borrowed share now."""

_Standing = tuple[int, int, tuple[float, ...]]
"""Within guarantee, priority, fair-share position (cohorts from the top, then the team)."""
_Key = tuple[int, int, tuple[float, ...], float, str]


def priority_of(policy: ClusterPolicy, job: JobView) -> int:
    """The job's class weight when prioritization is by priority; all equal under fifo."""
    if policy.prioritization is Prioritization.FIFO:
        return 0
    return policy.priority_of(job.spec.priority_class)


def next_job_keys(
    book: QuotaBook, usage: Mapping[TeamName, float] = NO_USAGE
) -> Callable[[JobView], _Key]:
    """The key that orders pending jobs: jobs that fit their team's guarantee first (a
    guarantee is honoured before anyone borrows), then by priority, then by the team's
    fair-share position (lowest first, when idle compute is shared fairly: its weighted
    borrowed share now plus its decayed ``usage`` over its weight, ``core.fair_share``), then
    by submission time. Computed against the books as they stand, so each admission moves its
    team back; the standing of jobs of one team, class and demand is worked out once while the
    team's figures in the books stay the same."""
    standing: dict[tuple[TeamName, int, str | None, Resources], _Standing] = {}

    def key(job: JobView) -> _Key:
        demand = total_demand(job)
        alike = (job.team, book.changes.get(job.team, 0), job.spec.priority_class, demand)
        known = standing.get(alike)
        if known is None:
            known = standing[alike] = _standing(book, job, demand, usage)
        return (*known, job.spec.submitted_at, job.id)

    return key


def _standing(
    book: QuotaBook, job: JobView, demand: Resources, usage: Mapping[TeamName, float]
) -> _Standing:
    policy = book.policy
    within = any(
        book.within_guarantee(job.team, flavor, demand) for flavor in flavors_for(job, book)
    )
    fair = policy.idle_allocation is IdleAllocation.FAIR_SHARE
    share = (
        (*cohort_shares(book, job.team), fair_share_position(book, job.team, usage)) if fair else ()
    )  # cohorts first, then the team (its share now and its decayed usage)
    return (0 if within else 1, -priority_of(policy, job), share)


def pending_in_order(
    jobs: Iterable[JobView],
    book: QuotaBook,
    usage: Mapping[TeamName, float],
    epoch: Callable[[], int],
) -> Iterator[JobView]:
    """Pending jobs one at a time, the best next first. Each team's queue keeps its own order
    (priority, then submission); among the teams' heads the next is chosen with
    :func:`next_job_keys` on the books *as admissions so far left them* (and each team's
    decayed ``usage``, constant within the cycle). A head's key depends only on its own
    team's figures, so it is computed again only when its usage of the books changed.

    ``epoch`` tells when the books may have changed since the last job was handed out: while
    it stays the same, the teams' heads wait in a heap and only the team just served gets a
    new key."""
    queues: dict[TeamName, list[JobView]] = {}
    for job in sorted(jobs, key=lambda job: team_order_key(book.policy, job)):
        queues.setdefault(job.team, []).append(job)
    positions = dict.fromkeys(queues, 0)
    known: dict[TeamName, tuple[str, int, _Key]] = {}
    key_of = next_job_keys(book, usage)

    def head_key(team: TeamName) -> _Key:
        head = queues[team][positions[team]]
        stamp = (head.id, book.changes.get(team, 0))
        cached = known.get(team)
        if cached is None or cached[:2] != stamp:
            cached = known[team] = (*stamp, key_of(head))
        return cached[2]

    heap = [(head_key(team), team) for team in positions]
    heapq.heapify(heap)
    seen = epoch()
    while heap:
        _, team = heapq.heappop(heap)
        while True:  # the team stays next while its new head comes before every other head
            yield queues[team][positions[team]]
            positions[team] += 1
            if positions[team] == len(queues[team]):
                del positions[team]
            if epoch() != seen:  # the books changed: any team's head may stand elsewhere now
                seen = epoch()
                heap = [(head_key(other), other) for other in positions]
                heapq.heapify(heap)
                break
            if team not in positions:
                break
            key = head_key(team)
            if heap and heap[0][0] < key:
                heapq.heappush(heap, (key, team))
                break


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
