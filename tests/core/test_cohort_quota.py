"""The quota book on a cohort tree: borrowing inside the team's own cohort first, then up the
path; a cohort's borrowing limit stops its subtree, its lending limit keeps capacity in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.quota import QuotaBook, QuotaVerdict, cohort_shares, dominant_share
from topoq.domain.governance import TeamName
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5, cohort, policy, team

CAPACITY = {P5: Resources({NVIDIA_GPU: 64})}


def gpus(amount: int) -> Resources:
    return Resources({NVIDIA_GPU: amount})


def book_of(*teams, cohorts=(), idle_sharing=False, usage=None) -> QuotaBook:  # type: ignore[no-untyped-def]  # test builder
    chosen = policy(*teams, cohorts=cohorts, idle_sharing=idle_sharing)
    used = {TeamName(t): {P5: gpus(n)} for t, n in (usage or {}).items()}
    return QuotaBook(chosen, CAPACITY, used)


TREE = (
    team("a", 16, cohort=["org", "x"]),
    team("borrower", 0, borrow_gpus=48, cohort=["org", "x"]),
    team("b", 16, cohort=["org", "y"]),
)


def deep_book(used: list[int], borrow: int | None, lend: int | None) -> QuotaBook:
    """TREE with c directly under org and d at the top, org/x's borrowing and org's lending
    limited, idle sharing on; ``used`` GPUs for a, borrower, b, c, d."""
    teams = (
        *TREE,
        team("c", 8, borrow_gpus=16, cohort=["org"]),
        team("d", 16, borrow_gpus=8),
    )
    cohorts = [cohort(["org", "x"], 4, borrow_gpus=borrow), cohort(["org"], lend_gpus=lend)]
    usage = dict(zip(["a", "borrower", "b", "c", "d"], used, strict=True))
    return book_of(*teams, cohorts=cohorts, idle_sharing=True, usage=usage)


def test_borrowing_is_served_inside_the_own_cohort_before_the_parent() -> None:
    book = book_of(*TREE, usage={"borrower": 8})
    assert book.lent(TeamName("a"), P5) == gpus(8)
    assert not book.lent(TeamName("b"), P5)
    book = book_of(*TREE, usage={"borrower": 24})
    assert book.lent(TeamName("a"), P5) == gpus(16)
    assert book.lent(TeamName("b"), P5) == gpus(8)
    assert book.check(TeamName("borrower"), P5, gpus(8)).verdict is QuotaVerdict.BORROWING
    assert book.check(TeamName("borrower"), P5, gpus(16)).verdict is QuotaVerdict.NO_LENDER


def test_a_cohort_borrowing_limit_stops_its_whole_subtree() -> None:
    book = book_of(*TREE, cohorts=[cohort(["org", "x"], borrow_gpus=8)], usage={"borrower": 16})
    assert book.check(TeamName("borrower"), P5, gpus(8)).verdict is QuotaVerdict.BORROWING
    refused = book.check(TeamName("borrower"), P5, gpus(16))
    assert refused.verdict is QuotaVerdict.BORROW_LIMIT
    assert "cohort org/x would take 16 nvidia.com/gpu from outside it" in refused.message
    assert "over its borrow limit of 8 nvidia.com/gpu" in refused.message
    assert refused.numbers["cohort"] == "org/x"


def test_a_cohort_lending_limit_keeps_its_unused_quota_in() -> None:
    book = book_of(*TREE, cohorts=[cohort(["org", "y"], lend_gpus=4)], usage={"borrower": 16})
    assert book.check(TeamName("borrower"), P5, gpus(4)).verdict is QuotaVerdict.BORROWING
    assert book.check(TeamName("borrower"), P5, gpus(8)).verdict is QuotaVerdict.NO_LENDER


def test_a_cohort_guarantee_is_shared_by_its_teams_and_is_not_idle() -> None:
    alone = (team("borrower", 0, borrow_gpus=32, cohort=["org", "x"]), team("c", 48))
    book = book_of(*alone, cohorts=[cohort(["org", "x"], 16)], idle_sharing=True)
    assert book.idle(P5) == Resources()  # 64 - 48 - 16
    assert book.check(TeamName("borrower"), P5, gpus(16)).verdict is QuotaVerdict.BORROWING
    assert book.check(TeamName("borrower"), P5, gpus(24)).verdict is QuotaVerdict.NO_LENDER
    assert book.check(TeamName("c"), P5, gpus(8)).verdict is QuotaVerdict.WITHIN_GUARANTEE


def test_a_lender_taking_its_guarantee_back_is_stopped_by_its_cohort_limit() -> None:
    """What the lender's cohort-mate borrowed must then come from outside the cohort, which
    its limit forbids: the work within the guarantee must reclaim first."""
    limited = [cohort(["org", "x"], borrow_gpus=0)]
    book = book_of(*TREE, cohorts=limited, usage={"borrower": 16})
    check = book.check(TeamName("a"), P5, gpus(8))
    assert check.verdict is QuotaVerdict.BORROW_LIMIT
    book.release(TeamName("borrower"), P5, gpus(8))
    assert book.check(TeamName("a"), P5, gpus(8)).verdict is QuotaVerdict.WITHIN_GUARANTEE


def test_reclaim_takes_back_only_what_the_claimants_side_lent() -> None:
    teams = (*TREE, team("c", 16, cohort=["lab"]), team("d", 0, borrow_gpus=16, cohort=["lab"]))
    book = book_of(*teams, usage={"borrower": 8, "d": 8})
    assert book.reclaimable(TeamName("a"), TeamName("borrower"), P5, gpus(8))
    # the lab's borrower borrows inside the lab: nothing of org's is in it
    assert not book.reclaimable(TeamName("a"), TeamName("d"), P5, gpus(8))
    assert book.closeness(TeamName("a"), TeamName("borrower")) == 2
    assert book.closeness(TeamName("a"), TeamName("b")) == 1
    assert book.closeness(TeamName("a"), TeamName("c")) == 0
    book = book_of(*TREE, usage={"borrower": 0, "b": 24})  # b borrows from x through org
    assert book.reclaimable(TeamName("a"), TeamName("b"), P5, gpus(8))
    # with its cohort-mate borrowing too, org/x would be over its own guarantee: what b runs
    # on did not come from org/x, so a takes back only from its cohort-mate
    book = book_of(*TREE, usage={"borrower": 16, "b": 24})
    assert not book.reclaimable(TeamName("a"), TeamName("b"), P5, gpus(8))
    assert book.reclaimable(TeamName("a"), TeamName("borrower"), P5, gpus(8))


def test_teams_without_a_cohort_reclaim_from_each_other_and_only_so_from_cohorts() -> None:
    teams = (*TREE, team("e", 16), team("f", 0, borrow_gpus=16))
    book = book_of(*teams, usage={"f": 8})  # f borrows e's unused guarantee
    assert book.reclaimable(TeamName("e"), TeamName("f"), P5, gpus(8))
    assert not book.reclaimable(TeamName("a"), TeamName("f"), P5, gpus(8))  # nothing of org's in it
    book = book_of(*teams, idle_sharing=True, usage={"f": 24})  # 8 of it from idle capacity
    assert book.reclaimable(TeamName("a"), TeamName("f"), P5, gpus(8))


def test_fair_share_standing_compares_cohorts_first_then_teams() -> None:
    teams = (
        team("a", 8, borrow_gpus=32, cohort=["org"]),
        team("b", 8, borrow_gpus=32, cohort=["org"]),
        team("c", 8, borrow_gpus=32, cohort=["lab"]),
    )
    book = book_of(*teams, idle_sharing=True, usage={"a": 24, "b": 8, "c": 16})
    a, b, c = (
        (*cohort_shares(book, TeamName(t)), dominant_share(book, TeamName(t))) for t in "abc"
    )
    assert a == (16 / 64, 16 / 64) and b == (16 / 64, 0.0) and c == (8 / 64, 8 / 64)
    assert c < b < a  # lab borrows less than org; inside org, b less than a
    weighted = book_of(*teams, cohorts=[cohort(["org"], weight=4)], idle_sharing=True)
    weighted.charge(TeamName("a"), P5, gpus(24))
    assert cohort_shares(weighted, TeamName("b"))[0] == 8 / 64 / 4


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.sampled_from(["a", "borrower", "b", "c", "d"]),
    st.sampled_from([8, 16, 32]),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
)
def test_settling_one_teams_path_again_gives_the_full_settlement(
    used: list[int], who: str, more: int, borrow: int | None, lend: int | None
) -> None:
    book = deep_book(used, borrow, lend)
    spec = book.policy.by_team[TeamName(who)]
    quick = book._flow_after(spec, P5, gpus(more))  # the shortcut check() takes
    trial = book.copy()
    trial.charge(TeamName(who), P5, gpus(more))
    full = QuotaBook(trial.policy, CAPACITY, trial.usage).flow(P5)  # settled from scratch
    for level in quick.need:
        assert quick.need[level] == full.need[level], level
        assert quick.over_limit[level] == full.over_limit[level], level
    assert quick.unserved == full.unserved


def test_borrowing_that_does_not_worsen_unbalanced_books_is_admitted() -> None:
    teams = (*TREE, team("c", 16, cohort=["lab"]), team("d", 0, borrow_gpus=16, cohort=["lab"]))
    book = book_of(*teams, usage={"borrower": 40})  # org can serve 32 of it: 8 unserved
    assert book.shortfall(P5) == gpus(8)
    assert book.check(TeamName("d"), P5, gpus(8)).verdict is QuotaVerdict.BORROWING
    assert book.check(TeamName("borrower"), P5, gpus(8)).verdict is QuotaVerdict.NO_LENDER


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.lists(
        st.tuples(st.sampled_from(["a", "borrower", "b", "c", "d"]), st.integers(-24, 24)),
        max_size=8,
    ),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
)
def test_the_flow_kept_across_charges_is_the_flow_settled_from_scratch(
    used: list[int], changes: list[tuple[str, int]], borrow: int | None, lend: int | None
) -> None:
    """A book updates its flow by the charged team's path only (``flow_updated``); after any
    run of charges and releases it equals a new book's full settlement of the same usage."""
    book = deep_book(used, borrow, lend)
    book.flow(P5)  # cached: every change below updates it
    for who, delta in changes:
        if delta >= 0:
            book.charge(TeamName(who), P5, gpus(delta))
        else:
            book.release(TeamName(who), P5, gpus(-delta))
        fresh = QuotaBook(book.policy, CAPACITY, book.usage)
        assert book.flow(P5) == fresh.flow(P5)
        assert book.shortfall(P5) == fresh.shortfall(P5)
