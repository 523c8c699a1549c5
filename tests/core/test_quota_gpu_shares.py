"""Shares of a GPU count against a team's GPU quota: one GPU of a guarantee, a borrowing or
lending limit is 1,000 thousandths, taken by whole GPUs and shares (``topoq.io/gpu-milli``)
together — in checks, lending, borrowing, reclaim and fair share — and messages show GPUs in
GPUs (``3.5``). Worked by hand on small books, then a property: a book's verdicts on mixes of
whole GPUs and shares are those of the same books with every amount in thousandths."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.fair_share import borrowed_fraction
from topoq.core.quota import QuotaBook, QuotaVerdict, cohort_shares, dominant_share
from topoq.core.quota_wait import quota_numbers, quota_remedies
from topoq.discovery.policy import policy_from_document
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import (
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorQuota,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.gpu_share import GPU_SHARE
from topoq.domain.job import Allocation, JobPhase, JobView
from topoq.domain.placement import PlacementResult
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5, cohort, job, policy, team

from .test_quota_reference import CAPACITY as REFERENCE_CAPACITY
from .test_quota_reference import FLAVOR as REFERENCE_FLAVOR
from .test_quota_reference import policies

CAPACITY = {P5: Resources({NVIDIA_GPU: 64})}
T, LENDER, BORROWER = TeamName("t"), TeamName("lender"), TeamName("borrower")


def gpus(whole: int = 0, milli: int = 0) -> Resources:
    """Whole GPUs and a share in thousandths (e.g. three pods of 0.5: ``gpus(milli=1500)``)."""
    return Resources({NVIDIA_GPU: whole, GPU_SHARE: milli})


def halves(count: int) -> Resources:
    return gpus(milli=500 * count)


def book_of(
    *teams: TeamSpec, usage: dict[TeamName, Resources] | None = None, **options: object
) -> QuotaBook:
    chosen = policy(*teams, idle_sharing=False, **options)  # type: ignore[arg-type]  # test builder
    return QuotaBook(chosen, CAPACITY, {name: {P5: used} for name, used in (usage or {}).items()})


FOUR_NO_BORROWING = team("t", 4, sharing=SharingStrategy.LEND)


# --- a guarantee of 4 GPUs and no borrowing --------------------------------------------------
def test_a_guarantee_of_four_gpus_runs_eight_pods_of_half_a_gpu_but_not_a_ninth() -> None:
    book = book_of(FOUR_NO_BORROWING, usage={T: halves(7)})
    assert book.check(T, P5, halves(1)).verdict is QuotaVerdict.WITHIN_GUARANTEE
    book.charge(T, P5, halves(1))
    refused = book.check(T, P5, halves(1))
    assert refused.verdict is QuotaVerdict.NO_QUOTA
    assert refused.message == (
        "team t uses 4/4 nvidia.com/gpu of its p5.48xlarge guarantee; "
        "it needs 0.5 nvidia.com/gpu more and may not borrow (Lend)"
    )
    assert refused.numbers == {
        "flavor": "p5.48xlarge",
        "resource": "nvidia.com/gpu",
        "requested": "0.5",
        "used": 4,
        "guarantee": 4,
        "borrowed": 0,
    }


def test_two_whole_gpus_and_four_halves_fit_a_guarantee_of_four() -> None:
    book = book_of(FOUR_NO_BORROWING, usage={T: gpus(2, 1500)})
    admitted = book.check(T, P5, halves(1))
    assert admitted.verdict is QuotaVerdict.WITHIN_GUARANTEE
    assert admitted.numbers["used"] == "3.5" and admitted.numbers["requested"] == "0.5"
    assert book.within_guarantee(T, P5, halves(1))
    assert not book.within_guarantee(T, P5, halves(2))


def test_three_whole_gpus_and_three_halves_do_not_fit_a_guarantee_of_four() -> None:
    book = book_of(FOUR_NO_BORROWING, usage={T: gpus(3, 1000)})
    assert book.check(T, P5, halves(1)).verdict is QuotaVerdict.NO_QUOTA
    book = book_of(FOUR_NO_BORROWING, usage={T: gpus(3, 500)})  # 3 whole and 1 half
    refused = book.check(T, P5, halves(2))
    assert refused.verdict is QuotaVerdict.NO_QUOTA
    assert refused.message == (
        "team t uses 3.5/4 nvidia.com/gpu of its p5.48xlarge guarantee; "
        "it needs 0.5 nvidia.com/gpu more and may not borrow (Lend)"
    )
    assert refused.numbers["used"] == "3.5" and refused.numbers["requested"] == 1
    assert book.describe(T, P5) == "uses 3.5/4 nvidia.com/gpu of its p5.48xlarge guarantee"


def test_a_wait_for_a_share_is_explained_in_gpus_and_remedied_in_whole_gpus() -> None:
    book = book_of(FOUR_NO_BORROWING, usage={T: gpus(3, 500)})
    waiting = job("w", "t", 1, gpus=1)
    numbers = quota_numbers(book, T, P5, halves(2))
    assert {k: numbers[k] for k in ("requested", "used", "guarantee", "borrow_limit")} == {
        "requested": 1,
        "used": "3.5",
        "guarantee": 4,
        "borrow_limit": 0,
    }
    running = JobView(
        job("r", "t", 1, gpus=1).spec,
        JobPhase.RUNNING,
        allocation=Allocation(PlacementResult("r", ()), {}, {P5: halves(1)}),
    )
    remedies = quota_remedies(book, waiting, P5, halves(2), QuotaVerdict.NO_QUOTA, [running])
    assert remedies == (  # a quota is whole GPUs: 4.5 rounds up to 5
        "raise t's guarantee on p5.48xlarge to 5 nvidia.com/gpu",
        "wait for r to end (they free 0.5 nvidia.com/gpu)",
    )


# --- borrowing and lending within a cohort ---------------------------------------------------
def test_a_share_is_borrowed_from_a_lender_in_the_same_cohort() -> None:
    lender = team("lender", 4, cohort=["org"])
    borrower = team("borrower", 0, borrow_gpus=8, cohort=["org"])
    book = book_of(lender, borrower, usage={LENDER: gpus(3)})
    borrowing = book.check(BORROWER, P5, halves(1))
    assert borrowing.verdict is QuotaVerdict.BORROWING
    assert borrowing.numbers["requested"] == "0.5"
    book.charge(BORROWER, P5, halves(1))
    assert book.borrowed(BORROWER, P5) == halves(1)
    assert book.lent(LENDER, P5) == halves(1)
    assert book.lendable(LENDER, P5) == gpus(1)
    assert book.describe(BORROWER, P5) == (
        "uses 0/0 nvidia.com/gpu of its p5.48xlarge guarantee and 0.5/8 borrowed"
    )
    assert book.check(BORROWER, P5, halves(1)).verdict is QuotaVerdict.BORROWING
    short = book.check(BORROWER, P5, gpus(1))  # 0.5 is left to lend
    assert short.verdict is QuotaVerdict.NO_LENDER
    assert short.numbers["missing"] == "0.5 nvidia.com/gpu"
    assert short.message.endswith(
        "it needs 1 nvidia.com/gpu and no lender has room for 0.5 nvidia.com/gpu of it"
    )


def test_a_lending_limit_of_one_gpu_is_lent_as_two_halves() -> None:
    lender = replace(
        team("lender", 4, cohort=["org"]),
        quotas=(FlavorQuota(P5, gpus(4), lending_limit=gpus(1)),),
    )
    borrower = team("borrower", 0, borrow_gpus=4, cohort=["org"])
    book = book_of(lender, borrower)
    for _ in range(2):
        assert book.check(BORROWER, P5, halves(1)).verdict is QuotaVerdict.BORROWING
        book.charge(BORROWER, P5, halves(1))
    assert book.lent(LENDER, P5) == gpus(1)
    assert book.check(BORROWER, P5, gpus(milli=1)).verdict is QuotaVerdict.NO_LENDER
    book.release(BORROWER, P5, halves(1))
    assert book.lent(LENDER, P5) == halves(1)
    assert book.check(BORROWER, P5, gpus(milli=500)).verdict is QuotaVerdict.BORROWING


def test_a_cohort_borrowing_limit_binds_shares() -> None:
    borrower = team("borrower", 0, borrow_gpus=8, cohort=["org", "x"])
    lender = team("lender", 8, cohort=["org"])
    book = book_of(borrower, lender, cohorts=[cohort(["org", "x"], borrow_gpus=1)])
    book.charge(BORROWER, P5, halves(1))
    assert book.check(BORROWER, P5, halves(1)).verdict is QuotaVerdict.BORROWING
    refused = book.check(BORROWER, P5, gpus(milli=501))
    assert refused.verdict is QuotaVerdict.BORROW_LIMIT
    assert "cohort org/x would take 1.001 nvidia.com/gpu from outside it" in refused.message


# --- reclaim and fair share ------------------------------------------------------------------
def test_a_lender_reclaims_what_it_lent_as_shares_only_within_its_guarantee() -> None:
    lender = team("lender", 4, cohort=["org"])
    borrower = team("borrower", 0, borrow_gpus=8, cohort=["org"])
    book = book_of(lender, borrower, usage={LENDER: gpus(3, 500), BORROWER: halves(1)})
    assert book.borrowed(BORROWER, P5) == halves(1)
    assert book.reclaimable(LENDER, BORROWER, P5, halves(1))  # 3.5 + 0.5 = its guarantee
    assert not book.reclaimable(LENDER, BORROWER, P5, gpus(1))  # 4.5: it would borrow itself
    assert book.check(LENDER, P5, halves(1)).verdict is QuotaVerdict.WITHIN_GUARANTEE
    idle = book_of(lender, borrower, usage={LENDER: gpus(3, 500)})
    assert not idle.reclaimable(LENDER, BORROWER, P5, halves(1))  # nothing was lent


def test_dominant_share_counts_borrowed_shares_as_parts_of_gpus() -> None:
    borrower = replace(team("borrower", 0, borrow_gpus=8, cohort=["org"]), fair_share_weight=2)
    lender = team("lender", 16, cohort=["org"])
    book = book_of(borrower, lender, usage={BORROWER: halves(3)})
    assert borrowed_fraction(book, BORROWER) == 1.5 / 64
    assert dominant_share(book, BORROWER) == 1.5 / 64 / 2
    assert dominant_share(book, LENDER) == 0.0
    assert cohort_shares(book, BORROWER) == (0.0,)  # org uses 1.5 of its 16
    whole = book_of(borrower, lender, usage={BORROWER: gpus(2)})
    assert dominant_share(whole, BORROWER) > dominant_share(book, BORROWER)


def test_shares_are_not_counted_where_no_quota_names_gpus() -> None:
    cpus = TeamSpec(T, (FlavorQuota(P5, Resources({"cpu": 4000})),), SharingStrategy.LEND)
    book = QuotaBook(ClusterPolicy(teams=(cpus,)), CAPACITY, {T: {P5: halves(20)}})
    assert book.check(T, P5, halves(4) + Resources({"cpu": 1000})).verdict.admissible
    assert not book.borrowed(T, P5)


# --- policies ----------------------------------------------------------------------------------
def _policy_with_quota(resources: dict[str, object]) -> ClusterPolicy:
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Policy",
        "metadata": {"name": "shares"},
        "teams": [{"name": "t", "quotas": [{"flavor": "p5.48xlarge", "resources": resources}]}],
    }
    return policy_from_document(document, source="policy.yaml")


def test_a_quota_in_shares_of_a_gpu_is_refused_with_what_to_write_instead() -> None:
    with pytest.raises(InvalidInputError) as refused:
        _policy_with_quota({GPU_SHARE: 2500})
    assert "topoq.io/gpu-milli" in str(refused.value)
    assert "write the quota in whole GPUs as nvidia.com/gpu" in str(refused.value)
    limit = CohortQuota(P5, borrow_limit=Resources({GPU_SHARE: 500}))
    with pytest.raises(InvalidInputError, match=r"names topoq\.io/gpu-milli"):
        CohortSpec("org", quotas=(limit,))  # nor a cohort's limit


def test_a_fractional_gpu_quota_is_still_refused() -> None:
    with pytest.raises(InvalidInputError, match="must be a whole number"):
        _policy_with_quota({NVIDIA_GPU: 2.5})
    assert _policy_with_quota({NVIDIA_GPU: 2}).by_team[T].quota_for(P5) is not None


# --- a property: the books in thousandths, by hand -------------------------------------------
GPU, THOUSANDTHS = NVIDIA_GPU, "example.com/gpu-thousandths"


def in_thousandths(resources: Resources) -> Resources:
    """``resources`` with GPUs and shares as one plain resource counted in thousandths."""
    rest = {n: v for n, v in resources.items() if n not in (GPU, GPU_SHARE)}
    return Resources(
        rest | {THOUSANDTHS: resources.amount(GPU) * 1000 + resources.amount(GPU_SHARE)}
    )


def named_in_thousandths(names: frozenset[str]) -> frozenset[str]:
    return frozenset(THOUSANDTHS if name == GPU else name for name in names)


def policy_in_thousandths(chosen: ClusterPolicy) -> ClusterPolicy:
    teams = tuple(
        replace(
            spec,
            quotas=tuple(
                FlavorQuota(
                    quota.flavor,
                    in_thousandths(quota.guarantee),
                    in_thousandths(quota.borrow_limit),
                    None if quota.lending_limit is None else in_thousandths(quota.lending_limit),
                    covers=named_in_thousandths(quota.covers),
                )
                for quota in spec.quotas
            ),
        )
        for spec in chosen.teams
    )
    cohorts = tuple(
        replace(
            spec,
            quotas=tuple(
                CohortQuota(
                    quota.flavor,
                    in_thousandths(quota.guarantee),
                    in_thousandths(quota.borrow_limit),
                    in_thousandths(quota.lending_limit),
                    named_in_thousandths(quota.borrow_limited),
                    named_in_thousandths(quota.lend_limited),
                    named_in_thousandths(quota.covers),
                )
                for quota in spec.quotas
            ),
        )
        for spec in chosen.cohorts
    )
    return replace(chosen, teams=teams, cohorts=cohorts)


usages = st.builds(
    lambda whole, milli, cpus: Resources({GPU: whole, GPU_SHARE: milli, "cpu": cpus}),
    st.integers(0, 12),
    st.sampled_from([0, 1, 250, 500, 999, 1500, 3000]),
    st.sampled_from([0, 40]),
)
demands = st.builds(
    lambda whole, milli, cpus: Resources({GPU: whole, GPU_SHARE: milli, "cpu": cpus}),
    st.sampled_from([0, 0, 1, 4]),
    st.sampled_from([0, 1, 250, 500, 999, 2000]),
    st.sampled_from([0, 40]),
)


@settings(max_examples=300, deadline=None)
@given(policies(), st.lists(usages, min_size=5, max_size=5), demands)
def test_verdicts_on_whole_gpus_and_shares_are_those_of_the_books_in_thousandths(
    chosen: ClusterPolicy, used: list[Resources], demand: Resources
) -> None:
    teams = [spec.name for spec in chosen.teams]
    usage = {name: {REFERENCE_FLAVOR: amount} for name, amount in zip(teams, used, strict=False)}
    book = QuotaBook(chosen, REFERENCE_CAPACITY, usage)
    by_hand = QuotaBook(
        policy_in_thousandths(chosen),
        {flavor: in_thousandths(amount) for flavor, amount in REFERENCE_CAPACITY.items()},
        {
            name: {flavor: in_thousandths(amount) for flavor, amount in flavors.items()}
            for name, flavors in usage.items()
        },
    )
    for name in teams:
        ours = book.check(name, REFERENCE_FLAVOR, demand)
        theirs = by_hand.check(name, REFERENCE_FLAVOR, in_thousandths(demand))
        assert ours.verdict is theirs.verdict, name
        for figure in (QuotaBook.borrowed, QuotaBook.lendable):
            assert in_thousandths(figure(book, name, REFERENCE_FLAVOR)) == figure(
                by_hand, name, REFERENCE_FLAVOR
            ), (figure, name)
        assert dominant_share(book, name) == dominant_share(by_hand, name)
        assert book.reclaimable(teams[0], name, REFERENCE_FLAVOR, demand) == (
            by_hand.reclaimable(teams[0], name, REFERENCE_FLAVOR, in_thousandths(demand))
        )
    assert in_thousandths(book.shortfall(REFERENCE_FLAVOR)) == by_hand.shortfall(REFERENCE_FLAVOR)
