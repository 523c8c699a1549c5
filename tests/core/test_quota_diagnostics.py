"""Waits for quota carry the team's numbers and the smallest change that would admit the job;
a job no flavor could ever admit waits with NEVER_FITS_CURRENT_POLICY and the limit."""

from __future__ import annotations

from topoq.core.holdings import capacity_by_flavor, usage_by_team
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.core.quota_wait import quota_remedies
from topoq.domain.decisions import Diagnostic, PendingReason
from topoq.domain.governance import FlavorName, SharingStrategy, TeamName
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.builders import BLOCK
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [1, 2, 4]  # 8 nodes of 8 GPUs: 64 GPUs of p5.48xlarge


def diagnostic(c: Cluster, job_id: str) -> Diagnostic:
    return next(d for d in c.last.diagnostics if d.job == job_id)


def test_a_borrow_limit_wait_names_the_limit_and_the_guarantee_that_would_admit_it() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 32, borrow_gpus=8), team("b", 24)), job("a1", "a", 4))
    c.cycle()
    c.submit(job("a2", "a", 2))
    c.cycle()
    found = diagnostic(c, "a2")
    assert found.reason is PendingReason.BORROW_LIMIT_REACHED
    numbers = dict(found.numbers)
    assert {k: numbers[k] for k in ("resource", "requested", "used", "guarantee")} == {
        "resource": "nvidia.com/gpu",
        "requested": 16,
        "used": 32,
        "guarantee": 32,
    }
    # b lends its unused 24 and 8 GPUs nobody is guaranteed are idle
    assert (numbers["borrowed"], numbers["borrow_limit"], numbers["free_to_lend"]) == (0, 8, 32)
    assert found.remedies == (
        "raise a's borrow limit on p5.48xlarge to 16 nvidia.com/gpu",
        "raise a's guarantee on p5.48xlarge to 40 nvidia.com/gpu",
        "wait for a1 to end (they free 32 nvidia.com/gpu)",
    )


def test_a_team_that_may_not_borrow_is_offered_a_guarantee_or_its_own_jobs_ending() -> None:
    lender = team("a", 16, sharing=SharingStrategy.LEND)
    c = Cluster.of(SHAPE, policy(lender, team("b", 40)), job("a1", "a", 1), job("a2", "a", 1))
    c.cycle()
    c.submit(job("a3", "a", 1))
    c.cycle()
    found = diagnostic(c, "a3")
    assert found.reason is PendingReason.WAITING_FOR_QUOTA
    assert found.numbers["used"] == 16 and found.numbers["borrow_limit"] == 0
    assert found.remedies == (
        "raise a's guarantee on p5.48xlarge to 24 nvidia.com/gpu",
        "wait for a1 to end (they free 8 nvidia.com/gpu)",
    )


def test_no_lender_names_how_much_is_free_to_lend_and_whose_end_would_free_enough() -> None:
    c = Cluster.of(
        SHAPE,
        policy(team("a", 16, borrow_gpus=32), team("b", 48)),
        job("a1", "a", 2),
        job("b1", "b", 5),
    )
    c.cycle()
    c.submit(job("a2", "a", 2))
    c.cycle()
    found = diagnostic(c, "a2")
    assert found.reason is PendingReason.NO_LENDER_HAS_ROOM
    assert found.numbers["free_to_lend"] == 8  # b's unused 8 GPUs; nothing is idle
    assert found.numbers["missing"] == "8 nvidia.com/gpu"
    assert found.remedies == ("wait for b1 to end (they free 40 nvidia.com/gpu)",)


def test_a_job_over_its_teams_guarantee_plus_borrow_limit_never_fits() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 16, borrow_gpus=8), team("b", 48)), job("a1", "a", 4))
    c.cycle()
    found = diagnostic(c, "a1")
    assert found.reason is PendingReason.NEVER_FITS_CURRENT_POLICY
    assert found.message == (
        "team a may use at most 24 nvidia.com/gpu of p5.48xlarge (a guarantee of 16 "
        "nvidia.com/gpu and a borrow limit of 8 nvidia.com/gpu); the job asks for 32 "
        "nvidia.com/gpu"
    )
    assert found.numbers["most_the_team_may_use"] == 24
    assert (
        found.remedies[0]
        == "ask an admin to raise a's borrow limit on p5.48xlarge to 16 nvidia.com/gpu"
    )


def test_a_gang_larger_than_any_domain_of_its_required_level_never_fits() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 32), team("b", 32)), job("b1", "b", 4))
    c.cycle()
    c.submit(job("a1", "a", 5, required=BLOCK))
    c.cycle()
    found = diagnostic(c, "a1")
    assert found.reason is PendingReason.NEVER_FITS_CURRENT_POLICY
    assert found.message.startswith(
        "it never fits in p5.48xlarge even with every node free: pod set workers: at most 4 "
        "of 5 pods fit in any one block domain"
    )
    assert found.numbers["max_pods_in_one_domain"] == 4


def test_a_queued_job_that_a_policy_change_makes_impossible_waits_with_the_numbers() -> None:
    c = Cluster.of(SHAPE, policy(team("a", 32, borrow_gpus=16), team("b", 32)), job("a1", "a", 4))
    c.cycle()
    c.submit(job("a2", "a", 5))
    c.cycle()
    assert c.reason("a2") == PendingReason.BORROW_LIMIT_REACHED  # 40 GPUs fit 32 + 16
    c.policy = policy(team("a", 32, borrow_gpus=4), team("b", 32))
    c.cycle()
    found = diagnostic(c, "a2")
    assert found.reason is PendingReason.NEVER_FITS_CURRENT_POLICY
    assert (found.numbers["requested"], found.numbers["most_the_team_may_use"]) == (40, 36)


def test_no_guarantee_past_the_flavors_capacity_is_advised() -> None:
    lender = team("a", 16, sharing=SharingStrategy.LEND)
    c = Cluster.of(SHAPE, policy(lender, team("b", 48)), job("a1", "a", 2))
    c.cycle()
    c.submit(job("a2", "a", 1))
    c.cycle()
    found = diagnostic(c, "a2")
    assert found.reason is PendingReason.WAITING_FOR_QUOTA  # 16 + 48 guaranteed: 64 of 64
    assert found.remedies == ("wait for a1 to end (they free 16 nvidia.com/gpu)",)


def test_quota_remedies_are_shared_while_the_books_stand_and_follow_every_change() -> None:
    """Remedies are memoized on the books: asked twice alike they are the same answer; after a
    charge they are worked out again on the books as they now stand."""
    c = Cluster.of(SHAPE, policy(team("a", 32, borrow_gpus=8), team("b", 24)), job("a1", "a", 4))
    c.cycle()
    holders = [v for v in c.jobs.values() if v.phase.holds_capacity]
    capacity = capacity_by_flavor(c.tree, "node.kubernetes.io/instance-type")
    book = QuotaBook(c.policy, capacity, usage_by_team(holders))
    flavor, asked = FlavorName("p5.48xlarge"), Resources({NVIDIA_GPU: 16})
    waiting = job("a2", "a", 2)
    first = quota_remedies(book, waiting, flavor, asked, QuotaVerdict.BORROW_LIMIT, holders)
    again = quota_remedies(
        book, job("a3", "a", 2), flavor, asked, QuotaVerdict.BORROW_LIMIT, holders
    )
    assert (
        first == again and first[0] == "raise a's borrow limit on p5.48xlarge to 16 nvidia.com/gpu"
    )
    book.charge(TeamName("a"), flavor, Resources({NVIDIA_GPU: 8}))  # a now borrows 8
    after = quota_remedies(book, waiting, flavor, asked, QuotaVerdict.BORROW_LIMIT, holders)
    assert after[0] == "raise a's borrow limit on p5.48xlarge to 24 nvidia.com/gpu"
