"""The pending order and the starving candidates' order (``core.ordering``) against the order
in words: after every job handed out, the best of the teams' heads by ``next_job_keys``
worked out afresh on the books as they stand; the starving candidates sorted by the keys on
the books as the cycle starts. The fast paths cache standings per team and class; these
properties say the caching never changes the order, with admissions between the jobs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_cycle_properties import CLASSES
from topoq.core.cycle.by_phase import PhaseIndex
from topoq.core.holdings import total_demand
from topoq.core.ordering import (
    OrderFacts,
    Queued,
    in_key_order,
    line_up,
    next_job_keys,
    order_facts,
    pending_in_line,
    pending_in_order,
    team_order_key,
)
from topoq.core.quota import QuotaBook
from topoq.domain.governance import ClusterPolicy, QueueOrder, TeamName
from topoq.domain.job import JobView
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5, cohort, job, policy, team

CAPACITY = {P5: Resources({NVIDIA_GPU: 128})}
TEAMS = "abcd"


@st.composite
def policies(draw: st.DrawFn) -> ClusterPolicy:
    """Up to four teams, some in cohorts (weighted, for fair share), under priority or fifo,
    fair share or first come, in submission or shortest-first order; a cohort may guarantee
    GPUs of its own."""
    in_cohort = draw(st.booleans())
    teams = [
        team(
            name,
            draw(st.sampled_from([0, 8, 16, 32])),
            borrow_gpus=draw(st.sampled_from([0, 16, 64])),
            weight=draw(st.integers(1, 3)),
            cohort=["org", "x" if name in "ab" else "y"] if in_cohort else [],
        )
        for name in TEAMS[: draw(st.integers(1, len(TEAMS)))]
    ]
    cohorts = (
        [cohort(["org", "x"], draw(st.sampled_from([0, 8, 16])), weight=draw(st.integers(1, 3)))]
        if in_cohort
        else []
    )
    rules = policy(
        *teams,
        classes=CLASSES,
        fair_share=draw(st.booleans()),
        fifo=draw(st.booleans()),
        cohorts=cohorts,
    )
    return replace(rules, queue_order=draw(st.sampled_from(QueueOrder)))


@st.composite
def situations(
    draw: st.DrawFn,
) -> tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]]:
    """A policy, the GPUs each team holds as the cycle starts, pending jobs (a few alike in
    class and demand, some submitted at the same instant) and decayed usage."""
    rules = draw(policies())
    names = [spec.name for spec in rules.teams]
    held = {name: draw(st.sampled_from([0, 8, 16, 48])) for name in names}
    jobs = [
        job(
            f"j{index:02d}",
            draw(st.sampled_from(names)),
            draw(st.sampled_from([1, 2])),
            draw(st.sampled_from([4, 8])),
            priority=draw(st.sampled_from(list(CLASSES))),
            at=float(draw(st.integers(0, 5))),
            time_limit=draw(st.sampled_from([None, 60.0, 3600.0])),
        )
        for index in range(draw(st.integers(0, 24)))
    ]
    usage = {name: draw(st.sampled_from([0.0, 0.25, 1.0])) for name in names}
    return rules, held, jobs, usage


def book_of(rules: ClusterPolicy, held: Mapping[TeamName, int]) -> QuotaBook:
    usage = {name: {P5: Resources({NVIDIA_GPU: gpus})} for name, gpus in held.items() if gpus}
    return QuotaBook(rules, CAPACITY, usage)


def reference_order(
    jobs: list[JobView],
    book: QuotaBook,
    usage: Mapping[TeamName, float],
    admit: Callable[[JobView], None],
) -> list[JobView]:
    """The pending order in words: each team's queue in its own order; next, the head with the
    least key, every key worked out afresh on the books as the admissions so far left them."""
    queues: dict[TeamName, list[JobView]] = {}
    for one in sorted(jobs, key=lambda one: team_order_key(book.policy, one)):
        queues.setdefault(one.team, []).append(one)
    order = []
    while queues:
        key = next_job_keys(book, usage)  # afresh: nothing cached from the step before
        team_next = min(queues, key=lambda name: key(queues[name][0]))
        chosen = queues[team_next].pop(0)
        if not queues[team_next]:
            del queues[team_next]
        order.append(chosen)
        admit(chosen)
    return order


class Admissions:
    """Admits the jobs handed out whose turn ``admitted`` says, charging their demand on the
    book and ending the epoch, as the cycle's state does; ``ends`` ends an epoch without any
    change (a release of a hold)."""

    def __init__(self, book: QuotaBook, admitted: list[bool], ends: list[bool]) -> None:
        self.book, self.admitted, self.ends = book, admitted, ends
        self.turn = 0
        self.epoch = 0

    def __call__(self, handed: JobView) -> None:
        turn, self.turn = self.turn, self.turn + 1
        if self.admitted[turn % len(self.admitted)]:
            self.book.charge(handed.team, P5, total_demand(handed))
            self.epoch += 1
        elif self.ends[turn % len(self.ends)]:
            self.epoch += 1


@settings(max_examples=300, deadline=None)
@given(
    situation=situations(),
    admitted=st.lists(st.booleans(), min_size=1, max_size=12),
    ends=st.lists(st.booleans(), min_size=1, max_size=5),
)
def test_the_pending_order_is_the_best_head_by_keys_worked_out_afresh_after_each_job(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    admitted: list[bool],
    ends: list[bool],
) -> None:
    rules, held, jobs, usage = situation
    reference = book_of(rules, held)
    expected = reference_order(jobs, reference, usage, Admissions(reference, admitted, ends))
    book = book_of(rules, held)
    admissions = Admissions(book, admitted, ends)
    order = []
    for handed in pending_in_order(jobs, book, usage, lambda: admissions.epoch):
        order.append(handed)
        admissions(handed)
    assert [one.id for one in order] == [one.id for one in expected]


@settings(max_examples=300, deadline=None)
@given(situation=situations(), leaving=st.sets(st.sampled_from("abc")), after=st.integers(0, 3))
def test_a_team_that_settles_its_jobs_left_leaves_the_order_and_the_others_keep_theirs(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    leaving: set[str],
    after: int,
) -> None:
    """Handing out no job changes no key: a team leaving the order (its jobs left settled by
    ``settle_rest``) leaves the others' jobs in the order they had."""
    rules, held, jobs, usage = situation
    names = sorted(spec.name for spec in rules.teams)
    teams = {
        names[ord(letter) - ord("a")] for letter in leaving if ord(letter) - ord("a") < len(names)
    }
    full = list(pending_in_order(jobs, book_of(rules, held), usage, lambda: 0))
    settled: list[JobView] = []

    def settle_rest(team: TeamName, queue: Sequence[Queued], position: int) -> bool:
        if team not in teams or position < after:
            return False
        settled.extend(job for _, job in queue[position:])
        return True

    order = list(pending_in_order(jobs, book_of(rules, held), usage, lambda: 0, settle_rest))
    assert [one.id for one in order] == [one.id for one in full if one not in settled]
    assert sorted(one.id for one in [*order, *settled]) == sorted(one.id for one in jobs)
    assert all(one.team in teams for one in settled)


@settings(max_examples=400, deadline=None)
@given(
    situation=situations(),
    marks=st.lists(st.sampled_from(["pass", "admit", "end", "wait"]), min_size=1, max_size=24),
)
def test_jobs_passed_over_leave_the_others_in_the_order_they_had(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    marks: list[str],
) -> None:
    """Jobs whose turns change nothing (``passes``) are passed over as their teams' queues are
    read, never handed out; every other job comes exactly where it comes when they are handed
    out and do nothing — with admissions (which move every key) and epochs that end without
    a change between them."""
    rules, held, jobs, usage = situation
    mark = {one.id: marks[index % len(marks)] for index, one in enumerate(jobs)}

    class ByMark:
        def __init__(self, book: QuotaBook) -> None:
            self.book, self.epoch = book, 0

        def __call__(self, handed: JobView) -> None:
            assert mark[handed.id] != "pass" or self is reference_turns
            if mark[handed.id] == "admit":
                self.book.charge(handed.team, P5, total_demand(handed))
                self.epoch += 1
            elif mark[handed.id] == "end":
                self.epoch += 1

    reference_book = book_of(rules, held)
    reference_turns = ByMark(reference_book)
    expected = reference_order(jobs, reference_book, usage, reference_turns)
    book = book_of(rules, held)
    turns = ByMark(book)
    passed: list[JobView] = []

    def passes(queued: list[tuple[object, JobView]], position: int) -> int:
        at = position
        while at < len(queued) and mark[queued[at][1].id] == "pass":
            passed.append(queued[at][1])
            at += 1
        return at - position

    order = []
    lineup = line_up(jobs, partial(order_facts, rules))
    handed_out = pending_in_line(lineup, book, usage, lambda: turns.epoch, None, lambda _: passes)
    for _, handed in handed_out:
        order.append(handed)
        turns(handed)
    assert [one.id for one in order] == [one.id for one in expected if mark[one.id] != "pass"]
    assert sorted(one.id for one in passed) == sorted(
        one.id for one in jobs if mark[one.id] == "pass"
    )


@settings(max_examples=300, deadline=None)
@given(situation=situations(), admitted=st.lists(st.booleans(), min_size=1, max_size=12))
def test_the_starving_candidates_come_in_key_order_on_the_books_as_the_cycle_starts(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    admitted: list[bool],
) -> None:
    """Whatever the books do while the candidates are taken (the guard's holds change none;
    here admissions do), the order is the keys' on the books as the guard began."""
    rules, held, jobs, usage = situation
    book = book_of(rules, held)
    expected = sorted(jobs, key=next_job_keys(book, usage))
    admissions = Admissions(book, admitted, [False])
    order = []
    for candidate in in_key_order(jobs, book, usage):
        order.append(candidate)
        admissions(candidate)
    assert [one.id for one in order] == [one.id for one in expected]


def test_a_cohort_guarantee_used_up_by_one_team_moves_its_siblings_back() -> None:
    """Cohort x guarantees 16 GPUs to a and b together. Once a's first four jobs of 4 GPUs
    used it up, b's job is within no guarantee any more and, submitted with a's fifth, comes
    after it by id — but b's standing, worked out before, still says within."""
    rules = policy(
        team("a", 0, cohort=["org", "x"]),
        team("b", 0, cohort=["org", "x"]),
        classes=CLASSES,
        cohorts=[cohort(["org", "x"], 16)],
    )
    jobs = [job(f"j0{index}", "a", gpus=4) for index in range(5)] + [job("j05", "b", gpus=4)]
    book = book_of(rules, {})
    admissions = Admissions(book, [True], [False])
    order = []
    for handed in pending_in_order(jobs, book, {}, lambda: admissions.epoch):
        order.append(handed.id)
        admissions(handed)
    assert order == ["j00", "j01", "j02", "j03", "j04", "j05"]


@settings(max_examples=300, deadline=None)
@given(
    situation=situations(),
    kept=st.lists(st.booleans(), min_size=1, max_size=8),
    later=st.sampled_from([0.0, 1.0, 3.0, 10.0]),
    guard=st.sampled_from([0.0, 2.0, 5.0]),
)
def test_a_lineup_brought_up_to_date_is_the_lineup_made_afresh(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    kept: list[bool],
    later: float,
    guard: float,
) -> None:
    """The jobs of the cycle before that are still ready keep their places, the others come
    and go, and jobs whose starvation guard passed meanwhile move to the starving: the queues
    and starving groups are those of a lineup made from scratch."""
    rules, _, jobs, _ = situation
    facts = partial(order_facts, rules)
    before = line_up(jobs[: len(jobs) // 2 + 1], facts, guard_s=guard, now=3.0)
    now_ready = [
        one for index, one in enumerate(jobs) if kept[index % len(kept)] or index > len(jobs) // 2
    ]
    now = 3.0 + later
    was = (_ids(before.queues), _ids(before.starving))
    updated = line_up(now_ready, facts, guard_s=guard, now=now, before=before)
    fresh = line_up(now_ready, facts, guard_s=guard, now=now)
    assert _ids(updated.queues) == _ids(fresh.queues)
    assert _ids(updated.starving) == _ids(fresh.starving)
    assert (_ids(before.queues), _ids(before.starving)) == was  # the one before is unchanged
    again = line_up(jobs, facts, guard_s=guard, now=now + later, before=updated)  # and again
    assert _ids(again.queues) == _ids(line_up(jobs, facts, guard_s=guard, now=now + later).queues)
    assert _ids(again.starving) == _ids(
        line_up(jobs, facts, guard_s=guard, now=now + later).starving
    )


def _ids(groups: Mapping[object, list[tuple[object, JobView]]]) -> dict[object, list[str]]:
    return {key: [one.id for _, one in group] for key, group in groups.items()}


def test_a_job_that_comes_back_as_another_object_is_lined_up_once() -> None:
    """A job requeued at once (a new object, the same id, submission and entry into the queue)
    replaces the one that went: both wait in the guard's heap until their time comes, and the
    lineup holds the new one once."""
    rules = policy(team("a", 32), classes=CLASSES)
    facts = partial(order_facts, rules)
    first = job("j1", "a", 1, 8)
    again = replace(first, preemptions=1)  # the same job requeued: another object
    assert again is not first
    before = line_up([first], facts, guard_s=5.0, now=1.0)
    gone = line_up([], facts, guard_s=5.0, now=2.0, before=before)
    back = line_up([again], facts, guard_s=5.0, now=3.0, before=gone)
    starved = line_up([again], facts, guard_s=5.0, now=9.0, before=back)
    assert [one for _, one in starved.queues["a"]] == [again]
    assert [one for group in starved.starving.values() for _, one in group] == [again]


@settings(max_examples=200, deadline=None)
@given(
    situation=situations(),
    moves=st.lists(st.lists(st.tuples(st.integers(0, 23), st.booleans()), max_size=5), max_size=6),
    lined_up_at=st.integers(0, 6),
    guard=st.sampled_from([0.0, 2.0, 5.0]),
)
def test_a_lineup_told_what_came_and_went_is_the_lineup_made_afresh(
    situation: tuple[ClusterPolicy, dict[TeamName, int], list[JobView], dict[TeamName, float]],
    moves: list[list[tuple[int, bool]]],
    lined_up_at: int,
    guard: float,
) -> None:
    """A shell's index hands each cycle what came and went among its ready jobs since its
    earlier reads (``ReadyChanges``): a lineup of an earlier read brought up to date by that —
    jobs stored again as new objects, jobs going and coming back, reads with no lineup between
    them (arrivals taken without a cycle) — holds what a lineup made afresh holds."""
    rules, _, jobs, _ = situation
    facts = partial(order_facts, rules)
    index = PhaseIndex()
    by_id = {one.id: one for one in jobs}
    for one in jobs[: len(jobs) // 2]:
        index.store(one)
    reads = [index.sorted_out()]
    for step in moves:
        for number, goes in step:
            if not jobs:
                break
            chosen = jobs[number % len(jobs)]
            if goes:
                index.forget(chosen.id)
            else:
                index.store(replace(by_id[chosen.id]))  # a new object each time it is stored
        reads.append(index.sorted_out())
    earlier, now_read = reads[min(lined_up_at, len(reads) - 1)], reads[-1]
    before = line_up(earlier.ready, facts, guard_s=guard, now=3.0, changes=earlier.ready_changes)
    asked: list[JobView] = []

    def counted(one: JobView) -> OrderFacts:
        asked.append(one)
        return facts(one)

    changes = now_read.ready_changes
    told = line_up(now_read.ready, counted, guard_s=guard, now=5.0, before=before, changes=changes)
    assert changes is not None and earlier.ready_changes is not None
    came = changes.since(earlier.ready_changes.made_from)
    assert came is not None and len(asked) == len(came[0])  # only the jobs that came
    fresh = line_up(now_read.ready, facts, guard_s=guard, now=5.0)
    assert _ids(told.queues) == _ids(fresh.queues)
    assert _ids(told.starving) == _ids(fresh.starving)
    assert {id(one) for group in told.queues.values() for _, one in group} == {
        id(one) for one in now_read.ready
    }
    assert told.made_from == changes.made_from
