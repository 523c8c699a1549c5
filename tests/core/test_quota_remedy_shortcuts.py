"""A waiting job's remedies ask the books what a changed quota or a charge would do without
making the changed policy or a charged copy (``QuotaBook.admits_with_quota``,
``guarantees_fit_with``, ``shortfall_if_charged``, ``borrowed_if_charged``): on random books
of the reference's random policies, every answer is the one the policy-based books and the
charged copy give."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_quota_reference import (
    CAPACITY,
    COVERS,
    ELSEWHERE,
    FLAVOR,
    GPU,
    amounts,
    changes,
    policies,
)
from topoq.core.quota import QuotaBook
from topoq.core.quota_wait import _admits, _admits_with_quota, _with_quota
from topoq.domain.governance import (
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    TeamName,
    TeamSpec,
)
from topoq.domain.resources import Resources
from topoq.testing.governance import job

Moves = list[tuple[int, FlavorName, Resources, bool]]
MEMORY = Resources({"memory": 1})
"""A resource no quota of the reference's policies covers."""


def books(rules: ClusterPolicy, moves: Moves, settle: bool) -> QuotaBook:
    """Books after random charges and releases; ``settle``: with the settlements worked out
    (then kept in step with every change) rather than settled when first asked."""
    book = QuotaBook(rules, CAPACITY)
    for index, flavor, amount, charge in moves:
        team = rules.teams[index % len(rules.teams)].name
        if settle:
            book.flow(flavor)
        (book.charge if charge else book.release)(team, flavor, amount + MEMORY)
    return book


def with_quota(
    rules: ClusterPolicy,
    team: TeamName,
    flavor: FlavorName,
    guarantee: Resources,
    limit: Resources,
) -> ClusterPolicy:
    spec = rules.by_team[team]
    quota = spec.quota_for(flavor) or FlavorQuota(flavor, Resources())
    changed = replace(quota, guarantee=guarantee, borrow_limit=limit)
    others = tuple(q for q in spec.quotas if q.flavor != flavor)
    teams = tuple(
        replace(t, quotas=(*others, changed)) if t.name == team else t for t in rules.teams
    )
    return replace(rules, teams=teams)


@settings(max_examples=250, deadline=None)
@given(
    policies(),
    changes,
    st.integers(0, 4),
    amounts,
    amounts,
    amounts,
    st.booleans(),
    st.booleans(),
)
def test_a_changed_quota_admits_as_books_under_the_changed_policy(
    rules: ClusterPolicy,
    moves: Moves,
    who: int,
    guarantee: Resources,
    limit: Resources,
    demand: Resources,
    elsewhere: bool,
    settle: bool,
) -> None:
    flavor = ELSEWHERE if elsewhere else FLAVOR
    team = rules.teams[who % len(rules.teams)].name
    book = books(rules, moves, settle)
    policy = with_quota(rules, team, flavor, guarantee, limit)
    trial = book.under(policy, team, flavor)
    asked = demand + MEMORY  # what no quota covers counts for nothing
    covered = COVERS if flavor == FLAVOR else frozenset()  # ELSEWHERE: no quota names any
    admits = trial.check(team, flavor, asked).verdict.admissible
    if rules.by_team[team].active and not (guarantee.keys() | limit.keys()) <= covered:
        admits = None  # another column: the shortcut declines (an inactive team: never admits)
    assert (
        book.admits_with_quota(team, flavor, asked, guarantee=guarantee, borrow_limit=limit)
        == admits
    )
    guaranteed = Resources()
    for spec in policy.teams:
        if spec.active:
            guaranteed = guaranteed + trial.guarantee(spec.name, flavor)
    capacity = trial.covered(flavor, CAPACITY.get(flavor, Resources()))
    fits = (
        trial.covered(flavor, guaranteed).fits_in(capacity) if guarantee.keys() <= covered else None
    )
    assert book.guarantees_fit_with(team, flavor, guarantee) == fits


@settings(max_examples=150, deadline=None)
@given(policies(), changes, st.integers(0, 4), amounts, st.booleans(), st.booleans(), st.booleans())
def test_a_raised_limit_or_guarantee_is_judged_as_on_the_changed_policy(
    rules: ClusterPolicy,
    moves: Moves,
    who: int,
    raised: Resources,
    elsewhere: bool,
    settle: bool,
    the_guarantee: bool,
) -> None:
    """The remedies' own question, answered on the books' figures and on a changed policy."""
    flavor = ELSEWHERE if elsewhere else FLAVOR
    spec = rules.teams[who % len(rules.teams)]
    book = books(rules, moves, settle)
    waiting = job("w", spec.name, 1, raised.amount("nvidia.com/gpu"))
    asked = book.covered(flavor, raised)
    change = {"guarantee" if the_guarantee else "borrow_limit": raised}
    slow = _admits(book, _with_quota(rules, spec.name, flavor, **change), waiting, flavor, asked)
    assert _admits_with_quota(book, waiting, flavor, asked, **change) == slow


@settings(max_examples=200, deadline=None)
@given(policies(), changes, st.integers(0, 5), amounts, st.booleans(), st.booleans())
def test_the_shortfall_and_borrowing_if_charged_are_a_charged_copys(
    rules: ClusterPolicy,
    moves: Moves,
    who: int,
    demand: Resources,
    elsewhere: bool,
    settle: bool,
) -> None:
    flavor = ELSEWHERE if elsewhere else FLAVOR
    names = [spec.name for spec in rules.teams]
    team = names[who] if who < len(names) else TeamName("nobody")
    book = books(rules, moves, settle)
    trial = book.copy()
    trial.charge(team, flavor, demand + MEMORY)
    assert book.shortfall_if_charged(team, flavor, demand + MEMORY) == trial.shortfall(flavor)
    assert book.borrowed_if_charged(team, flavor, demand + MEMORY) == trial.borrowed(team, flavor)


def test_a_quota_naming_a_resource_no_quota_covers_is_left_to_the_changed_policy() -> None:
    """Its books would have another column: the shortcut declines (the caller makes the
    policy and asks its books)."""
    quota = FlavorQuota(FLAVOR, Resources({"cpu": 8}))
    rules = ClusterPolicy(teams=(TeamSpec(TeamName("a"), (quota,)),))
    book = QuotaBook(rules, CAPACITY)
    more = Resources({"cpu": 8, "memory": 1})
    assert (
        book.admits_with_quota(TeamName("a"), FLAVOR, more, guarantee=more, borrow_limit=more)
        is None
    )
    assert book.guarantees_fit_with(TeamName("a"), FLAVOR, more) is None


def test_a_cohort_over_its_borrowing_limit_admits_as_on_the_changed_policy() -> None:
    """Team a borrows through cohort org, which may take no GPUs from outside it: a higher
    borrow limit does not admit a's job, a higher guarantee does (or would, but for what the
    flavor has)."""
    no_gpus = CohortQuota(FLAVOR, borrow_limit=Resources(), borrow_limited=frozenset({GPU}))
    a = TeamSpec(TeamName("a"), (FlavorQuota(FLAVOR, gpus(8), gpus(16)),), cohort=("org",))
    b = TeamSpec(TeamName("b"), (FlavorQuota(FLAVOR, gpus(16)),))
    rules = ClusterPolicy(teams=(a, b), cohorts=(CohortSpec("org", (), (no_gpus,)),))
    book = QuotaBook(rules, CAPACITY, {a.name: {FLAVOR: gpus(8)}})
    waiting = job("w", "a", 1, 8)
    assert "cohort" in book.check(a.name, FLAVOR, gpus(8)).numbers  # org's limit binds
    for change in (
        {"borrow_limit": gpus(24)},
        {"guarantee": gpus(16)},
        {"guarantee": gpus(56)},  # 56 + 16 guaranteed: more than the flavor's 64
        {"guarantee": gpus(8)},
    ):
        slow = _admits(book, _with_quota(rules, a.name, FLAVOR, **change), waiting, FLAVOR, gpus(8))
        assert _admits_with_quota(book, waiting, FLAVOR, gpus(8), **change) == slow, change
        expected = change == {"guarantee": gpus(16)}
        assert slow is expected, change


def gpus(count: int) -> Resources:
    return Resources({GPU: count})
