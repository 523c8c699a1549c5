"""Shares of a GPU through the scheduling cycle: a job whose shares add up to more GPUs than its
team may ever use never fits (told in GPUs, remedied in whole GPUs), and what an admission
records as borrowed is what it adds to the team's borrowing, never a negative share."""

from __future__ import annotations

from dataclasses import replace

from topoq.domain.decisions import PendingReason
from topoq.domain.governance import SharingStrategy
from topoq.domain.gpu_share import GPU_SHARE, GPU_SHARING_LABEL
from topoq.domain.job import JobView
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.testing.governance import P5, Cluster, job, policy, team

SHARING = {GPU_SHARING_LABEL: "true"}


def shares(job_id: str, team_name: str, pods: int, milli: int) -> JobView:
    """``pods`` pods of ``milli`` thousandths of a GPU each."""
    made = job(job_id, team_name, pods)
    pod_set = replace(made.spec.workload.pod_sets[0], requests=Resources({GPU_SHARE: milli}))
    workload = replace(made.spec.workload, pod_sets=(pod_set,))
    return replace(made, spec=replace(made.spec, workload=workload))


def test_shares_adding_up_to_more_than_the_team_may_ever_use_never_fit() -> None:
    rules = policy(team("nlp", 8, sharing=SharingStrategy.LEND))
    cluster = Cluster.of([1, 1, 2], rules, shares("big", "nlp", 19, 500), labels=SHARING)
    result = cluster.cycle()
    (wait,) = result.diagnostics
    assert wait.reason is PendingReason.NEVER_FITS_CURRENT_POLICY
    assert "may use at most 8 nvidia.com/gpu" in wait.message
    assert "the job asks for 9.5 nvidia.com/gpu" in wait.message
    assert wait.numbers["requested"] == "9.5"
    assert any("guarantee on p5.48xlarge to 10 nvidia.com/gpu" in r for r in wait.remedies)
    fits = Cluster.of([1, 1, 2], rules, shares("fits", "nlp", 16, 500), labels=SHARING)
    assert [admit.job for admit in fits.cycle().admissions] == ["fits"]


def test_what_an_admission_records_as_borrowed_is_the_share_it_adds() -> None:
    lender = team("lender", 8, cohort=["org"])
    borrower = team("b", 1, borrow_gpus=4, cohort=["org"])
    rules = policy(lender, borrower)
    first = shares("first", "b", 3, 500)  # 1.5 GPUs: 0.5 borrowed
    cluster = Cluster.of([1, 1, 2], rules, first, labels=SHARING)
    (admitted,) = cluster.cycle().admissions
    assert admitted.allocation.borrowed == {P5: Resources({GPU_SHARE: 500})}
    cluster.submit(shares("second", "b", 1, 500))  # 2 GPUs: 1 borrowed, half of it this one's
    (second,) = cluster.cycle().admissions
    assert second.allocation.borrowed == {P5: Resources({GPU_SHARE: 500})}
    cluster.submit(job("whole", "b", 1, gpus=1))
    (whole,) = cluster.cycle().admissions
    assert whole.allocation.borrowed == {P5: Resources({NVIDIA_GPU: 1})}
