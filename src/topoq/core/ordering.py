"""The order pending jobs are considered in, and the order victims are chosen in."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from topoq.core.admission import flavors_for
from topoq.core.fair_share import fair_share_position
from topoq.core.holdings import total_demand
from topoq.core.quota import QuotaBook, cohort_shares
from topoq.core.starvation import waiting_since
from topoq.core.time_limits import time_limit_of
from topoq.domain.governance import (
    ClusterPolicy,
    IdleAllocation,
    Prioritization,
    QueueOrder,
    TeamName,
)
from topoq.domain.job import JobView
from topoq.domain.resources import Resources

if TYPE_CHECKING:
    from topoq.core.cycle.by_phase import ReadyChanges

NO_USAGE: Mapping[TeamName, float] = MappingProxyType({})
"""No usage history: the fair-share position is the weighted borrowed share now."""

_Standing = tuple[int, int, tuple[float, ...]]
"""Within guarantee, priority, fair-share position (cohorts from the top, then the team)."""
Turn = tuple[float, float, str]
"""A job's place among jobs that stand alike (``turn_of``): its time limit under
shortest-first (0 under submission order), its submission time, its id."""
_Key = tuple[int, int, tuple[float, ...], float, float, str]
OrderKey = _Key
"""A pending job's key in the order (``next_job_keys``)."""


class OrderFacts(NamedTuple):
    """What the order needs of a job that only the job and the policy decide, worked out once
    per job (the cycle keeps them for the next while the job is the very same object)."""

    team_order: tuple[int, float, float, str]
    """Its place in its team's own queue (``team_order_key``)."""
    kind: tuple[TeamName, str | None, tuple[tuple[str, int], ...]]
    """What its standing depends on: team, priority class and demand (as plain tuples, so
    that grouping by it costs no ``Resources`` comparison)."""
    submission: Turn
    """Its turn (``turn_of``): the last parts of its key."""
    waiting_since: float
    """When it last entered the queue (``starvation.waiting_since``)."""
    alike: int = -1
    """The number the caller groups jobs that get one answer by (the cycle: the job's
    class's; -1: none given)."""


def order_facts(
    policy: ClusterPolicy,
    job: JobView,
    alike: int = -1,
    demand: tuple[tuple[str, int], ...] | None = None,
) -> OrderFacts:
    """``demand``: the job's ``total_demand`` as items, when the caller knows it (a cycle has
    it from the job's shape, once per shape)."""
    submission = turn_of(policy, job)
    if demand is None:
        demand = tuple(total_demand(job).items())
    return OrderFacts(
        (-priority_of(policy, job), *submission),
        (job.team, job.spec.priority_class, demand),
        submission,
        waiting_since(job),
        alike,
    )


def turn_of(policy: ClusterPolicy, job: JobView) -> Turn:
    """The job's turn among jobs that stand alike: by submission (time, then id), or under
    ``shortest-first`` by its time limit first (``time_limit_of``), jobs with none last."""
    if policy.queue_order is QueueOrder.SUBMISSION:
        return (0.0, job.spec.submitted_at, job.id)
    limit = time_limit_of(policy, job)
    return (float("inf") if limit is None else limit, job.spec.submitted_at, job.id)


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
    by its turn (``turn_of``: submission, or the shortest time limit first). Computed
    against the books as they stand, so each admission moves its team back; the standing of
    jobs of one team, class and demand is worked out once while the team's figures in the
    books stay the same."""
    standing: dict[tuple[TeamName, int, str | None, Resources], _Standing] = {}
    policy = book.policy

    def key(job: JobView) -> _Key:
        demand = total_demand(job)
        alike = (job.team, book.changes.get(job.team, 0), job.spec.priority_class, demand)
        known = standing.get(alike)
        if known is None:
            known = standing[alike] = _standing(book, job, demand, usage)
        return (*known, *turn_of(policy, job))

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


def _standing_of(
    book: QuotaBook, job: JobView, kind: Hashable, usage: Mapping[TeamName, float]
) -> _Standing:
    """``_standing`` of ``job``, of ``kind`` (``OrderFacts.kind``: all a standing depends on
    of the job), memoized on the books as they stand (``QuotaBook.memo``, cleared by every
    change) for ``usage``: the starvation guard's groups and the teams' queues ask for the
    same kinds on the same books as a cycle starts."""
    key = ("standing", kind)
    known = book.memo.get(key)
    if isinstance(known, tuple) and known[0] is usage:
        return known[1]  # type: ignore[no-any-return]
    standing = _standing(book, job, total_demand(job), usage)
    book.memo[key] = (usage, standing)
    return standing


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
    settle_rest: SettleRest | None = None,
    facts: Callable[[JobView], OrderFacts] | None = None,
) -> Iterator[JobView]:
    """``pending_in_line`` of the jobs lined up afresh (``facts``: each job's
    ``order_facts``, worked out here when not given)."""
    policy = book.policy
    facts_of = facts or (lambda job: order_facts(policy, job))
    lineup = line_up(list(jobs), facts_of)
    return (job for _, job in pending_in_line(lineup, book, usage, epoch, settle_rest))


Queued = tuple[OrderFacts, JobView]
"""A job in its team's queue, with its facts."""
SettleRest = Callable[[TeamName, Sequence[Queued], int], bool]


class Lineup:
    """The ready jobs in their teams' queues (team order: priority, then submission) with
    their facts, and those that starve grouped by kind in submission order: lined up once, then
    kept from cycle to cycle on the same policy and brought up to date by the jobs that came
    and went (``line_up``), so that a cycle does not sort and group every waiting job again.
    It keeps the jobs it lines up, so the ``id`` it knows each by stays that job's. Never
    changed once made: the next cycle's is a new one (sharing the lists neither changes)."""

    __slots__ = ("_waiting", "_where", "guard_s", "made_from", "now", "queues", "starving")

    def __init__(self, guard_s: float, now: float) -> None:
        self.queues: dict[TeamName, list[Queued]] = {}
        self.starving: dict[object, list[Starving]] = {}
        """The starving jobs of each kind (``OrderFacts.kind``), in submission order."""
        self._waiting: list[tuple[float, Turn, int, JobView]] = []
        """A heap of the jobs not starving yet: when each will, its submission, the job's
        ``id`` and the job (a job that went stays until its time comes, and is then let go;
        so a job may be there twice, as the object that went and as the one that came back in
        its place: the ``id`` tells them apart without comparing jobs)."""
        self._where: dict[int, tuple[Queued, Starving | None]] = {}
        """Each job's entry in its team's queue, and among the starving if it starves, by the
        job's ``id``: the jobs lined up."""
        self.guard_s, self.now = guard_s, now
        self.made_from: tuple[object, int] | None = None
        """Which ready jobs of a shell's index these are (``ReadyChanges.made_from``), when
        they are an index's ready jobs as they were read."""

    def passing_guard_by(self, now: float) -> list[Queued]:
        """The jobs lined up and not starving yet whose starvation guard passes by ``now``
        (with their facts; a job that went may still be among them)."""
        waiting, found, looked = self._waiting, [], [0] if self._waiting else []
        while looked:  # the heap's entries due by ``now``: children are never due sooner
            at = looked.pop()
            starves_at, _, key, job = waiting[at]
            if starves_at > now:
                continue
            known = self._where.get(key)
            if known is not None and known[0][1] is job and known[1] is None:
                found.append(known[0])
            looked.extend(child for child in (2 * at + 1, 2 * at + 2) if child < len(waiting))
        return found

    def next_guard_passing(self, after: float) -> float | None:
        """The first instant after ``after`` at which a job lined up and not starving yet
        passes the starvation guard (None: none will). A job that went may still be counted
        until its time comes: never later than the truth."""
        waiting = self._waiting
        if not waiting:
            return None
        if waiting[0][0] > after:
            return waiting[0][0]
        return min((entry[0] for entry in waiting if entry[0] > after), default=None)

    def _add(self, job: JobView, facts: OrderFacts) -> tuple[Queued, Starving | None]:
        entry = (facts, job)
        self.queues.setdefault(job.team, []).append(entry)
        starving = None
        if self.guard_s > 0:
            starves_at = facts.waiting_since + self.guard_s
            if self.now >= starves_at:
                starving = (facts.submission, job)
                self.starving.setdefault(facts.kind, []).append(starving)
            else:
                heapq.heappush(self._waiting, (starves_at, facts.submission, id(job), job))
        self._where[id(job)] = (entry, starving)
        return entry, starving


Starving = tuple[Turn, JobView]
"""A starving job among those of its kind: its turn, the job."""


def line_up(
    jobs: Sequence[JobView],
    facts_of: Callable[[JobView], OrderFacts],
    *,
    guard_s: float = 0.0,
    now: float = 0.0,
    before: Lineup | None = None,
    changes: ReadyChanges | None = None,
) -> Lineup:
    """``jobs`` lined up (``Lineup``): from ``before`` when it was lined up on the same
    starvation guard no later than ``now`` — its jobs still among ``jobs`` kept in place, the
    ones that went taken out, the others added in order, those whose guard passed since moved
    to the starving — else afresh. The same queues and groups either way. ``changes``: how
    ``jobs``, a shell's index's ready jobs, came about; when ``before`` was lined up from an
    earlier generation of them, the jobs that came and went are taken from there instead of
    comparing every job."""
    made_from = changes.made_from if changes is not None else None
    if before is not None and before.guard_s == guard_s and before.now <= now:
        since = changes.since(before.made_from) if changes is not None else None
        updated = _LineupUpdate(before, guard_s, now).made(jobs, facts_of, since)
        if updated is not None:
            updated.made_from = made_from
            return updated
    lineup = Lineup(guard_s, now)
    for job in jobs:
        lineup._add(job, facts_of(job))
    for queued in lineup.queues.values():
        queued.sort()  # by the facts, whose team order ends with the job's id: no ties
    for group in lineup.starving.values():
        group.sort()
    lineup.made_from = made_from
    return lineup


class _LineupUpdate:
    """A lineup made from the one before: it shares that one's lists until it changes one,
    and then changes its own copy (``own``), remembering how many of its first entries are
    in order already."""

    def __init__(self, before: Lineup, guard_s: float, now: float) -> None:
        self.before = before
        self.lineup = lineup = Lineup(guard_s, now)
        lineup._where = dict(before._where)
        lineup.queues, lineup.starving = dict(before.queues), dict(before.starving)
        lineup._waiting = list(before._waiting)
        self.in_order: dict[tuple[bool, Hashable], int] = {}

    def own(self, starving: bool, key: Hashable) -> list[Any]:
        lists: dict[Any, list[Any]] = self.lineup.starving if starving else self.lineup.queues
        if (starving, key) not in self.in_order:
            lists[key] = list(lists.get(key, ()))
            self.in_order[starving, key] = len(lists[key])
        return lists[key]

    def take_out(self, starving: bool, key: Hashable, entry: Any) -> None:
        entries = self.own(starving, key)
        del entries[bisect.bisect_left(entries, entry)]  # in order still
        self.in_order[starving, key] -= 1

    def made(
        self,
        jobs: Sequence[JobView],
        facts_of: Callable[[JobView], OrderFacts],
        since: tuple[Sequence[JobView], Sequence[JobView]] | None = None,
    ) -> Lineup | None:
        """The lineup of ``jobs``; ``since``: the views that came and went since ``before``'s
        jobs (else found by comparing every job's ``id``). None when ``since`` does not take
        ``before``'s jobs to ``jobs`` (the caller lines them up afresh)."""
        lineup = self.lineup
        where = lineup._where
        added, gone = self._came_and_went(jobs, since)
        for view in gone:
            known = where.pop(id(view), None)
            if known is None or known[0][1] is not view:
                return None  # ``since`` is not of these jobs
            entry, starving = known
            self.take_out(False, entry[1].team, entry)
            if starving is not None:
                self.take_out(True, entry[0].kind, starving)
        waiting = lineup._waiting
        while waiting and waiting[0][0] <= lineup.now:  # their guard passed: they starve now
            _, submission, _, job = heapq.heappop(waiting)
            known = where.get(id(job))
            if known is not None and known[0][1] is job and known[1] is None:
                # lined up still, and not starving yet (a job that went and came back may be
                # in the heap twice; the heap keeps it alive, so the id is its own)
                self.own(True, known[0][0].kind).append((submission, job))
                where[id(job)] = (known[0], (submission, job))
        for job in added:
            if id(job) in where:
                return None  # lined up already: ``since`` is not of these jobs
            facts = facts_of(job)
            self.own(False, job.team)
            self.own(True, facts.kind)
            lineup._add(job, facts)
        if since is not None and len(where) != len(jobs):
            return None  # ``since`` is not of these jobs
        for (is_starving, key), in_order in self.in_order.items():
            lists: dict[Any, list[Any]] = lineup.starving if is_starving else lineup.queues
            if lists[key]:
                _in_order_again(lists[key], in_order)
            else:
                del lists[key]
        return lineup

    def _came_and_went(
        self, jobs: Sequence[JobView], since: tuple[Sequence[JobView], Sequence[JobView]] | None
    ) -> tuple[list[JobView], list[JobView]]:
        """The jobs to add (in the order ``_added`` finds them) and the views to take out."""
        if since is not None:
            return list(reversed(since[0])), list(since[1])
        lined_up = self.before._where
        present = set(map(id, jobs))
        gone = [lined_up[key][0][1] for key in lined_up.keys() - present]
        return _added(jobs, present - lined_up.keys()), gone


def _added(jobs: Sequence[JobView], added: set[int]) -> list[JobView]:
    """The jobs whose ids are ``added``, looked for from the end (new jobs come last, mostly)."""
    found: list[JobView] = []
    if not added:
        return found
    for job in reversed(jobs):
        if id(job) in added:
            found.append(job)
            if len(found) == len(added):
                break
    return found


def _in_order_again(entries: list[Any], kept: int) -> None:
    """``entries`` in order again, the first ``kept`` of them in order already: the entries
    added after them sorted and, unless they all come after the kept ones (new jobs usually
    do), merged in (tuples whose first part ends with the job's id: no ties)."""
    if len(entries) == kept:
        return
    added = sorted(entries[kept:])
    if kept == 0 or entries[kept - 1] < added[0]:
        entries[kept:] = added
    else:
        entries[:] = heapq.merge(entries[:kept], added)


Passes = Callable[[Sequence["Queued"], int], int]
"""``passes(queued, position)``: how many of a team's ``queued[position:]``, in a row, are jobs
whose turns, whenever they come in this cycle, would change nothing but their own waits; those
waits are decided now (the caller passes over the jobs)."""
Passer = Callable[[TeamName], Passes | None]
"""A team's ``Passes`` as its queue is read now (None: none of its jobs is passed over now)."""


def pending_in_line(
    lineup: Lineup,
    book: QuotaBook,
    usage: Mapping[TeamName, float],
    epoch: Callable[[], int],
    settle_rest: SettleRest | None = None,
    passer: Passer | None = None,
) -> Iterator[Queued]:
    """The lined-up jobs one at a time (with their facts), the best next first. Each team's
    queue keeps its own order (priority, then submission); among the teams' heads the next is
    chosen with :func:`next_job_keys` on the books *as admissions so far left them* (and each team's
    decayed ``usage``, constant within the cycle). A head's key depends only on its own
    team's figures, so its standing is worked out again only when the team's count of changes
    in the book moved (``_TeamQueue``).

    ``epoch`` tells when the books may have changed since the last job was handed out: while
    it stays the same, the teams' heads wait in a heap and only the team just served gets a
    new key; once it moves, every head's key is asked again (most come from the teams'
    caches) and the heap is built anew.

    ``settle_rest(team, queued, position)``, asked before a team's next job is handed out,
    answers True when it has settled the team's jobs left (``queued[position:]``) itself: the
    team then leaves the order (its jobs are not handed out).

    ``passer`` (``Passer``) lets a team's jobs whose turns change nothing be passed over as
    its queue is read, instead of handed out: the jobs handed out come in the same order as
    without it. Within an epoch the jobs come in the order of their *standing keys* — a
    job's key, or that of a job ahead of it in its team's queue if that is greater (the head
    of a queue goes first) — so a passed job counts only as its key: the team's next job
    handed out stands at least there. When the epoch moves, the passed jobs whose standing
    keys come after the job that moved it would still be waiting at the head of their
    queues: their keys are worked out again with the next job's (``_TeamQueue.rekeyed``)."""
    queues = {team: _TeamQueue(team, queued, book, usage) for team, queued in lineup.queues.items()}
    heap = []
    for team, queue in list(queues.items()):
        standing = queue.advance(None, settle_rest, passer)
        if standing is None:
            del queues[team]
        else:
            heap.append((standing, team))
    heapq.heapify(heap)
    seen = epoch()
    while heap:
        standing, team = heapq.heappop(heap)
        queue = queues[team]
        while True:  # the team stays next while its next job comes before every other head
            queue.passed.clear()  # they all stand before this one
            yield queue.queued[queue.position]
            queue.position += 1
            moved = epoch() != seen
            after = queue.advance(None if moved else standing, settle_rest, passer)
            if after is None:
                del queues[team]
            if moved:  # the books changed: any team's head may stand elsewhere now
                seen = epoch()
                heap = [
                    (other.rekeyed(standing), name)
                    for name, other in queues.items()
                    if other is not queue
                ]
                if after is not None:
                    heap.append((after, team))
                heapq.heapify(heap)
                break
            if after is None:
                break
            standing = after
            if heap and heap[0][0] < standing:
                heapq.heappush(heap, (standing, team))
                break


class _TeamQueue:
    """One team's lined-up jobs and its head: a head's key is its kind's standing — computed
    once per kind while the team's count of changes in the book stays the same, as
    ``next_job_keys`` caches it — followed by its submission, both from the job's facts:
    handing out a job costs a look-up and a tuple, not a key worked out from the job."""

    __slots__ = (
        "_book",
        "_counted",
        "_standings",
        "_usage",
        "passed",
        "position",
        "queued",
        "team",
    )

    def __init__(
        self,
        team: TeamName,
        queued: list[Queued],
        book: QuotaBook,
        usage: Mapping[TeamName, float],
    ) -> None:
        self.team = team
        self.queued = queued
        """The team's jobs with their facts, in the team's order (not changed here)."""
        self.position = 0
        """The queue's head: the first job neither handed out nor passed over yet."""
        self.passed: list[tuple[_Key, int]] = []
        """The jobs passed over since the last one handed out: each one's standing key (see
        ``pending_in_line``) and its position."""
        self._book, self._usage = book, usage
        self._counted: int | None = None
        """The team's count of changes in the book that ``_standings`` were worked out at."""
        self._standings: dict[object, _Standing] = {}

    def standings(self) -> dict[object, _Standing]:
        """The standings of the team's kinds worked out so far on the books as they stand."""
        changes = self._book.changes.get(self.team, 0)
        if changes != self._counted:
            self._counted, self._standings = changes, {}
        return self._standings

    def key_at(self, position: int, standings: dict[object, _Standing]) -> _Key:
        """``next_job_keys`` of the job at ``position`` (``standings``: ``standings()`` now)."""
        facts, job = self.queued[position]
        standing = standings.get(facts.kind)
        if standing is None:
            standing = standings[facts.kind] = _standing_of(
                self._book, job, facts.kind, self._usage
            )
        return standing + facts.submission

    def advance(
        self, standing: _Key | None, settle_rest: SettleRest | None, passer: Passer | None
    ) -> _Key | None:
        """Move the head past the jobs the team's ``Passes`` passes over, and the standing key
        of the job it stops at (``standing``: the team's standing key so far in this epoch,
        None at its start); None when the team has no job left to hand out (``settle_rest``
        may have settled the rest)."""
        queued, position = self.queued, self.position
        end = len(queued)
        if position == end or (
            settle_rest is not None and settle_rest(self.team, queued, position)
        ):
            return None
        passes = passer(self.team) if passer is not None else None
        standings = self.standings()
        count = passes(queued, position) if passes is not None else 0
        record = self.passed.append
        for at in range(position, position + count + 1):  # the passed, then the next
            if at == end:
                self.position = end
                return None
            facts, job = queued[at]  # key_at and _later, written out: a passed job costs
            kind = standings.get(facts.kind)  # little else
            if kind is None:
                kind = standings[facts.kind] = _standing_of(
                    self._book, job, facts.kind, self._usage
                )
            key = kind + facts.submission
            if standing is None or standing < key:
                standing = key
            if at < position + count:
                record((standing, at))
        self.position = position + count
        return standing

    def rekeyed(self, before: _Key) -> _Key:
        """The standing key of the head after the epoch moved at a job that stood at
        ``before``: the jobs passed over that stood after it would be at the head still, so
        the head stands at least where they do now."""
        standings = self.standings()
        if not self.passed:  # the usual: the head alone
            return self.key_at(self.position, standings)
        standing: _Key | None = None
        still = []
        for key, position in self.passed:
            if before < key:  # standing keys only grow along the queue: the rest too
                standing = _later(standing, self.key_at(position, standings))
                still.append((standing, position))
        self.passed = still
        head = self.key_at(self.position, standings)
        return _later(standing, head)


def _later(standing: _Key | None, key: _Key) -> _Key:
    """The standing key of a job of ``key`` behind jobs that stood at ``standing``."""
    return key if standing is None or standing < key else standing


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
    groups: dict[object, list[tuple[Turn, JobView]]] = {}
    for job in jobs:
        known = facts_of(job)
        groups.setdefault(known.kind, []).append((known.submission, job))
    ordered = groups_in_key_order(
        {kind: sorted(group) for kind, group in groups.items()}, book, usage
    )
    return (job for _, job in ordered)


def groups_in_key_order(
    groups: Mapping[Hashable, list[tuple[Turn, JobView]]],
    book: QuotaBook,
    usage: Mapping[TeamName, float] = NO_USAGE,
) -> Iterator[tuple[_Key, JobView]]:
    """``in_key_order`` of jobs already grouped by kind (``OrderFacts.kind``), each group in
    submission order, each with its key (``next_job_keys``)."""
    alike = [
        (_standing_of(book, group[0][1], kind, usage), group)
        for kind, group in groups.items()
        if group
    ]  # worked out now: the books may change before the last job is handed out
    return _merged(alike)


def key_on_books(
    book: QuotaBook, job: JobView, facts: OrderFacts, usage: Mapping[TeamName, float]
) -> _Key:
    """``next_job_keys``' key of ``job`` (of ``facts``) on ``book`` as it stands (a book a
    cycle handed on: its figures are not changed, its memo only gains answers true of it)."""
    return _standing(book, job, total_demand(job), usage) + facts.submission


def _merged(
    alike: list[tuple[_Standing, list[tuple[Turn, JobView]]]],
) -> Iterator[tuple[_Key, JobView]]:
    """The jobs of groups that each stand alike and are in submission order, by their keys
    (each with its key)."""
    heap = [(standing + group[0][0], index, 0) for index, (standing, group) in enumerate(alike)]
    heapq.heapify(heap)  # keys end with the job's id: no two are equal
    while heap:
        key, index, position = heapq.heappop(heap)
        standing, group = alike[index]
        yield key, group[position][1]
        if position + 1 < len(group):
            heapq.heappush(heap, (standing + group[position + 1][0], index, position + 1))


def team_order_key(policy: ClusterPolicy, job: JobView) -> tuple[int, float, float, str]:
    """A team's own queue order: priority, then its turn (``turn_of``)."""
    return (-priority_of(policy, job), *turn_of(policy, job))


def eviction_order(policy: ClusterPolicy, jobs: Iterable[JobView]) -> list[JobView]:
    """Lowest priority first, then the most recently started (least work lost)."""
    return sorted(jobs, key=lambda job: eviction_key(policy, job))


def eviction_key(policy: ClusterPolicy, job: JobView) -> tuple[int, float, str]:
    """``eviction_order``'s key: no two jobs share one."""
    return (priority_of(policy, job), -(job.started_at or job.admitted_at or 0.0), job.id)
