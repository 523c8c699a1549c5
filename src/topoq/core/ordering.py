"""The order pending jobs are considered in, and the order victims are chosen in."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

from topoq.core.admission import flavors_for
from topoq.core.fair_share import fair_share_position
from topoq.core.holdings import total_demand
from topoq.core.quota import QuotaBook, cohort_shares
from topoq.core.starvation import waiting_since
from topoq.domain.governance import ClusterPolicy, IdleAllocation, Prioritization, TeamName
from topoq.domain.job import JobView
from topoq.domain.resources import Resources

NO_USAGE: Mapping[TeamName, float] = MappingProxyType({})
"""No usage history: the fair-share position is the weighted borrowed share now."""

_Standing = tuple[int, int, tuple[float, ...]]
"""Within guarantee, priority, fair-share position (cohorts from the top, then the team)."""
_Key = tuple[int, int, tuple[float, ...], float, str]


class OrderFacts(NamedTuple):
    """What the order needs of a job that only the job and the policy decide, worked out once
    per job (the cycle keeps them for the next while the job is the very same object)."""

    team_order: tuple[int, float, str]
    """Its place in its team's own queue (``team_order_key``)."""
    kind: tuple[TeamName, str | None, tuple[tuple[str, int], ...]]
    """What its standing depends on: team, priority class and demand (as plain tuples, so
    that grouping by it costs no ``Resources`` comparison)."""
    submission: tuple[float, str]
    """Submission time and id: the last parts of its key."""
    waiting_since: float
    """When it last entered the queue (``starvation.waiting_since``)."""


def order_facts(policy: ClusterPolicy, job: JobView) -> OrderFacts:
    submission = (job.spec.submitted_at, job.id)
    return OrderFacts(
        (-priority_of(policy, job), *submission),
        (job.team, job.spec.priority_class, tuple(total_demand(job).items())),
        submission,
        waiting_since(job),
    )


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
    facts: Callable[[JobView], OrderFacts] | None = None,
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
    team then leaves the order (its jobs are not handed out). ``facts``: each job's
    ``order_facts`` (worked out here when not given)."""
    policy = book.policy
    facts_of = facts or (lambda job: order_facts(policy, job))
    by_team: dict[TeamName, list[tuple[OrderFacts, JobView]]] = {}
    for job in jobs:
        by_team.setdefault(job.team, []).append((facts_of(job), job))
    kinds: dict[tuple[TeamName, str | None, tuple[tuple[str, int], ...]], int] = {}
    queues = {
        team: _TeamQueue(team, sorted(mine, key=_in_team_order), kinds, book, usage)
        for team, mine in by_team.items()
    }
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
        queued: list[tuple[OrderFacts, JobView]],
        kinds: dict[tuple[TeamName, str | None, tuple[tuple[str, int], ...]], int],
        book: QuotaBook,
        usage: Mapping[TeamName, float],
    ) -> None:
        """``queued``: the jobs with their facts, in the team's order; ``kinds`` numbers each
        (priority class, demand) met, shared by the cycle's queues (each queue keeps its own
        standings per number)."""
        self.team = team
        self.jobs = [job for _, job in queued]
        self.position = 0
        """The queue's head: the first job not handed out yet."""
        self._book, self._usage = book, usage
        self._kinds = [kinds.setdefault(facts.kind, len(kinds)) for facts, _ in queued]
        self._submissions = [facts.submission for facts, _ in queued]
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


def _in_team_order(queued: tuple[OrderFacts, JobView]) -> tuple[int, float, str]:
    return queued[0].team_order


def in_key_order(
    jobs: Iterable[JobView],
    book: QuotaBook,
    usage: Mapping[TeamName, float] = NO_USAGE,
    facts: Callable[[JobView], OrderFacts] | None = None,
) -> Iterator[JobView]:
    """``jobs`` in the order of :func:`next_job_keys` on the books as they stand when this is
    called (changes to the books while the jobs are handed out do not move them), for callers
    that take only the first few: jobs of one team, class and demand stand alike, so the
    standing is worked out once per such group, and within a group the order is that of
    submission (time, id). Only each group's best waits in a heap; a group's next joins it
    when its predecessor is handed out."""
    policy = book.policy
    facts_of = facts or (lambda job: order_facts(policy, job))
    groups: dict[object, list[tuple[tuple[float, str], JobView]]] = {}
    for job in jobs:
        known = facts_of(job)
        groups.setdefault(known.kind, []).append((known.submission, job))
    alike = [
        (_standing(book, group[0][1], total_demand(group[0][1]), usage), sorted(group))
        for group in groups.values()
    ]  # worked out now: the books may change before the last job is handed out
    return _merged(alike)


def _merged(
    alike: list[tuple[_Standing, list[tuple[tuple[float, str], JobView]]]],
) -> Iterator[JobView]:
    """The jobs of groups that each stand alike and are in submission order, by their keys."""
    heap = [(standing + group[0][0], index, 0) for index, (standing, group) in enumerate(alike)]
    heapq.heapify(heap)  # keys end with the job's id: no two are equal
    while heap:
        _, index, position = heapq.heappop(heap)
        standing, group = alike[index]
        yield group[position][1]
        if position + 1 < len(group):
            heapq.heappush(heap, (standing + group[position + 1][0], index, position + 1))


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
