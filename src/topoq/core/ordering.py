"""The order pending jobs are considered in, and the order victims are chosen in."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
    within = _within_guarantee(book, job, demand)
    fair = policy.idle_allocation is IdleAllocation.FAIR_SHARE
    share = (
        (*cohort_shares(book, job.team), fair_share_position(book, job.team, usage)) if fair else ()
    )  # cohorts first, then the team (its share now and its decayed usage)
    return (0 if within else 1, -priority_of(policy, job), share)


def _within_guarantee(book: QuotaBook, job: JobView, demand: Resources) -> bool:
    """Whether the job's demand fits its team's guarantee in one of its flavors, memoized on
    the books as they stand (``QuotaBook.memo``, cleared by every change): the jobs of each
    class of a team that want as much ask alike, and this is the dearest part of a standing."""
    asked = ("within-guarantee", job.team, demand)
    known = book.memo.get(asked)
    if not isinstance(known, bool):
        known = book.memo[asked] = any(
            book.within_guarantee(job.team, flavor, demand) for flavor in flavors_for(job, book)
        )
    return known


def pending_in_order(
    jobs: Iterable[JobView],
    book: QuotaBook,
    usage: Mapping[TeamName, float],
    epoch: Callable[[], int],
    settle_rest: Callable[[TeamName, Sequence[JobView], int], bool] | None = None,
) -> Iterator[JobView]:
    """Pending jobs one at a time, the best next first. Each team's queue keeps its own order
    (priority, then submission); among the teams' heads the next is chosen with
    :func:`next_job_keys` on the books *as admissions so far left them* (and each team's
    decayed ``usage``, constant within the cycle). A head's key depends only on its own
    team's figures, so its standing is worked out again only when the team's count of changes
    in the book moved (``_TeamQueue``).

    ``epoch`` tells when the books may have changed since the last job was handed out: while
    it stays the same, the teams' heads wait in a heap and only the team just served gets a
    new key; once it moves, every head's key is asked again (most come from the teams'
    caches) and the heap is built anew.

    ``settle_rest(team, jobs, position)``, asked before a team's next job is handed out,
    answers True when it has settled the team's jobs left (``jobs[position:]``) itself: the
    team then leaves the order (its jobs are not handed out)."""
    by_team: dict[TeamName, list[JobView]] = {}
    for job in sorted(jobs, key=lambda job: team_order_key(book.policy, job)):
        by_team.setdefault(job.team, []).append(job)
    kinds: dict[tuple[str | None, Resources], int] = {}
    queues = {team: _TeamQueue(team, mine, kinds, book, usage) for team, mine in by_team.items()}
    heap = [(queue.head_key(), team) for team, queue in queues.items()]
    heapq.heapify(heap)
    seen = epoch()

    def settled(queue: _TeamQueue) -> bool:
        return queue.position == len(queue.jobs) or (
            settle_rest is not None and settle_rest(queue.team, queue.jobs, queue.position)
        )

    while heap:
        _, team = heapq.heappop(heap)
        queue = queues[team]
        if settled(queue):
            del queues[team]
            continue
        while True:  # the team stays next while its new head comes before every other head
            yield queue.head()
            queue.position += 1
            if settled(queue):
                del queues[team]
            if epoch() != seen:  # the books changed: any team's head may stand elsewhere now
                seen = epoch()
                heap = [(other.head_key(), name) for name, other in queues.items()]
                heapq.heapify(heap)
                break
            if team not in queues:
                break
            key = queue.head_key()
            if heap and heap[0][0] < key:
                heapq.heappush(heap, (key, team))
                break


class _TeamQueue:
    """One team's pending jobs in the team's own order, and what the key of each
    (:func:`next_job_keys`) needs that the books do not move, worked out once as the queue is
    built: the kind of its standing (priority class and demand, as a small number) and its
    submission (time, id). A head's key is then its kind's standing — computed once per kind
    while the team's count of changes in the book stays the same, as ``next_job_keys`` caches
    it — followed by its submission: handing out a job costs a look-up and a tuple, not a
    key worked out from the job."""

    __slots__ = (
        "_book",
        "_counted",
        "_kinds",
        "_standings",
        "_submissions",
        "_usage",
        "jobs",
        "position",
        "team",
    )

    def __init__(
        self,
        team: TeamName,
        jobs: list[JobView],
        kinds: dict[tuple[str | None, Resources], int],
        book: QuotaBook,
        usage: Mapping[TeamName, float],
    ) -> None:
        """``jobs`` in the team's order; ``kinds`` numbers each (priority class, demand) met,
        shared by the cycle's queues (each queue keeps its own standings per number)."""
        self.team = team
        self.jobs = jobs
        self.position = 0
        """The queue's head: the first job not handed out yet."""
        self._book, self._usage = book, usage
        self._kinds = [
            kinds.setdefault((job.spec.priority_class, total_demand(job)), len(kinds))
            for job in jobs
        ]
        self._submissions = [(job.spec.submitted_at, job.id) for job in jobs]
        self._counted: int | None = None
        """The team's count of changes in the book that ``_standings`` were worked out at."""
        self._standings: dict[int, _Standing] = {}

    def head(self) -> JobView:
        return self.jobs[self.position]

    def head_key(self) -> _Key:
        """``next_job_keys`` of the head on the books as they stand now."""
        changes = self._book.changes.get(self.team, 0)
        if changes != self._counted:
            self._counted, self._standings = changes, {}
        kind = self._kinds[self.position]
        standing = self._standings.get(kind)
        if standing is None:
            head = self.jobs[self.position]
            standing = self._standings[kind] = _standing(
                self._book, head, total_demand(head), self._usage
            )
        return standing + self._submissions[self.position]


def in_key_order(
    jobs: Iterable[JobView], book: QuotaBook, usage: Mapping[TeamName, float] = NO_USAGE
) -> Iterator[JobView]:
    """``jobs`` in the order of :func:`next_job_keys` on the books as they stand when this is
    called (changes to the books while the jobs are handed out do not move them), for callers
    that take only the first few: jobs of one team, class and demand stand alike, so the
    standing is worked out once per such group, and within a group the order is that of
    submission (time, id). Only each group's best waits in a heap; a group's next joins it
    when its predecessor is handed out."""
    groups: dict[tuple[TeamName, str | None, Resources], list[JobView]] = {}
    for job in jobs:
        groups.setdefault((job.team, job.spec.priority_class, total_demand(job)), []).append(job)
    alike = [
        (_standing(book, group[0], total_demand(group[0]), usage), sorted(group, key=_submission))
        for group in groups.values()
    ]  # worked out now: the books may change before the last job is handed out
    return _merged(alike)


def _merged(alike: list[tuple[_Standing, list[JobView]]]) -> Iterator[JobView]:
    """The jobs of groups that each stand alike and are in submission order, by their keys."""
    heap = [
        (standing + _submission(group[0]), index, 0)
        for index, (standing, group) in enumerate(alike)
    ]
    heapq.heapify(heap)  # keys end with the job's id: no two are equal
    while heap:
        _, index, position = heapq.heappop(heap)
        standing, group = alike[index]
        yield group[position]
        if position + 1 < len(group):
            following = group[position + 1]
            heapq.heappush(heap, (standing + _submission(following), index, position + 1))


def _submission(job: JobView) -> tuple[float, str]:
    return (job.spec.submitted_at, job.id)


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
