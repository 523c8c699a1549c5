"""A charge keeps the books' settlement in step by settling the charged team's path only, and
only as far up as figures move: the same settlement as settling every cohort anew, and what
each team lends is what a new book of the same usage works out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.quota import QuotaBook, _need, _offer
from topoq.core.quota_flow import path_after, settled, with_team
from topoq.domain.governance import TeamName
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5

from .test_cohort_quota import CAPACITY, deep_book, gpus

TEAMS = ["a", "borrower", "b", "c", "d"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.sampled_from(TEAMS),
    st.integers(-24, 24),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
)
def test_settling_a_charge_on_part_of_a_path_is_settling_every_cohort_anew(
    used: list[int], who: str, more: int, borrow: int | None, lend: int | None
) -> None:
    book = deep_book(used, borrow, lend)
    flavor = book._book(P5)
    settlement = book._settlement(flavor)
    spec = book.policy.by_team[TeamName(who)]
    after = tuple(max(0, value + more) for value in flavor.used.get(spec.name, flavor.terms.zero))
    need, offer = _need(flavor, spec.name, after), _offer(flavor, spec.name, after)
    direct = with_team(flavor.terms, settlement, spec.name, spec.cohort, need, offer)
    team_need = {**settlement.team_need, spec.name: need}
    team_offer = {**settlement.team_offer, spec.name: offer}
    assert direct == settled(book.tree, flavor.terms, team_need, team_offer, settlement.idle)
    quick = path_after(flavor.terms, settlement, spec.name, spec.cohort, need=need, offer=offer)
    assert quick.unserved == direct.unserved  # what a check settles agrees
    for level in quick.need:
        assert quick.need[level] == direct.need[level], level
        assert quick.over_limit[level] == direct.over_limit[level], level


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.lists(st.tuples(st.sampled_from(TEAMS), st.integers(-24, 24)), max_size=8),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
)
def test_what_teams_lend_after_charges_is_what_a_new_book_lends(
    used: list[int], changes: list[tuple[str, int]], borrow: int | None, lend: int | None
) -> None:
    """What each team lends is kept while a charge leaves the settlement as it was (a charge
    of nothing included) and worked out again otherwise."""
    book = deep_book(used, borrow, lend)
    for who, delta in changes:
        book.lent(TeamName(who), P5)  # cached: a charge keeps it only if nothing moved
        if delta >= 0:
            book.charge(TeamName(who), P5, gpus(delta))
        else:
            book.release(TeamName(who), P5, gpus(-delta))
        fresh = QuotaBook(book.policy, CAPACITY, book.usage)
        for name in TEAMS:
            assert book.lent(TeamName(name), P5) == fresh.lent(TeamName(name), P5), name


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.lists(
        st.tuples(
            st.sampled_from(["charge", "charge", "copy", "read"]),
            st.integers(0, 3),
            st.sampled_from(TEAMS),
            st.integers(-24, 24),
        ),
        max_size=12,
    ),
    st.sampled_from([None, 0, 8, 24]),
)
def test_books_settled_when_read_agree_with_new_books_whatever_was_copied_between(
    used: list[int], run: list[tuple[str, int, str, int]], borrow: int | None
) -> None:
    """A charge settles the team's path when the books are next read: charges of one or
    several teams, copies taken before the read (sharing what is not settled yet) and reads
    in any order leave every book with the flow a new book of its usage settles."""
    books = [deep_book(used, borrow, 8)]
    books[0].flow(P5)
    for what, which, who, delta in run:
        book = books[which % len(books)]
        if what == "copy":
            books.append(book.copy())
        elif what == "read":
            assert book.flow(P5) == QuotaBook(book.policy, CAPACITY, book.usage).flow(P5)
        elif delta >= 0:
            book.charge(TeamName(who), P5, gpus(delta))
        else:
            book.release(TeamName(who), P5, gpus(-delta))
    for book in books:
        fresh = QuotaBook(book.policy, CAPACITY, book.usage)
        assert book.flow(P5) == fresh.flow(P5)
        assert book.shortfall(P5) == fresh.shortfall(P5)
        assert all(book.lent(TeamName(n), P5) == fresh.lent(TeamName(n), P5) for n in TEAMS)


def _sums(used: list[int]) -> dict[TeamName, dict[str, dict[str, int]]]:
    """Per team and flavor, plain amounts as ``PreparedLedger.sums`` keeps them (zeros left
    out)."""
    return {
        TeamName(name): {P5: {NVIDIA_GPU: amount}}
        for name, amount in zip(TEAMS, used, strict=True)
        if amount
    }


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.lists(st.sampled_from([0, 8, 16, 24, 40]), min_size=5, max_size=5),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
    st.booleans(),
)
def test_books_following_the_last_cycles_answer_as_books_counted_afresh(
    used: list[int], now: list[int], borrow: int | None, lend: int | None, settle_first: bool
) -> None:
    """A cycle's books are derived from the last cycle's by the teams whose usage moved
    (``QuotaBook.following``): every figure and answer is that of books counted from the
    new usage, and the books derived from are left as they were."""
    first = deep_book(used, borrow, lend)
    before = _sums(used)
    books = QuotaBook(first.policy, CAPACITY, _usage(before)).counted()
    if settle_first:  # the last cycle worked out the settlement and what each team lends
        books.flow(P5)
        books.lent(TeamName("a"), P5)
    after = _sums(now)
    for name, flavors in before.items():  # an unchanged team keeps its very sums
        if after.get(name) == flavors:
            after[name] = flavors
    kept_flow = books.flow(P5)
    derived = books.following(before, after)
    fresh = QuotaBook(first.policy, CAPACITY, _usage(after))
    assert derived.usage == fresh.usage and list(derived.usage) == list(fresh.usage)
    assert derived.flow(P5) == fresh.flow(P5)
    for name in TEAMS:
        team_name = TeamName(name)
        for name_resource in (P5,):
            assert derived.borrowed(team_name, name_resource) == fresh.borrowed(
                team_name, name_resource
            )
            assert derived.lent(team_name, name_resource) == fresh.lent(team_name, name_resource)
        for more in (8, 24):
            assert derived.check(team_name, P5, gpus(more)) == fresh.check(
                team_name, P5, gpus(more)
            ), (name, more)
    assert books.flow(P5) == kept_flow  # the books derived from are unchanged
    assert books.usage == _usage(before)


def _usage(sums: dict[TeamName, dict[str, dict[str, int]]]) -> dict[TeamName, dict[str, Resources]]:
    """``PreparedLedger.usage_by_team`` of ``sums``."""
    return {
        team: {flavor: Resources(amount) for flavor, amount in flavors.items()}
        for team, flavors in sums.items()
    }
