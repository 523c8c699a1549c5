"""Expected start times for waiting jobs, from the time limits of running jobs.

A job's ETA is the earliest end (by its time limit) of a running job after which, with every
running job that ends by then gone, the job passes its quota check and fits. For a gang that
holds capacity it is the hold's expected start (:mod:`topoq.core.backfill`): nothing that
starts meanwhile may delay it. For any other waiting job it is a lower bound — jobs ahead of
it may take the capacity first — and the cycle gives it only to each team's first waiting
job, so that it stays cheap (a binary search over the running jobs' ends per team). No ETA is
given when the job would fit only after a job without a time limit ends."""

from __future__ import annotations

from collections.abc import Sequence

from topoq.core.admission import Attempt
from topoq.core.backfill import Ending, as_endings, first_fitting
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.quota import QuotaBook
from topoq.domain.job import JobView

ETA_KEY = "eta_at"
"""The key of a diagnostic's numbers that holds the ETA (seconds, as ``snapshot.now``)."""


def expected_start(
    ledger: CapacityLedger,
    book: QuotaBook,
    job: JobView,
    attempt: Attempt,
    ending: Sequence[Ending],
    now: float,
) -> float | None:
    """When ``job`` would start on ``attempt``'s flavor once the earliest of ``ending`` have
    ended (``now`` if it could start now); None when even all of them ending is not enough."""
    demand = job.spec.workload.total_requests
    released = as_endings(ending)

    def starts(count: int) -> bool:
        trial_book = book.copy()
        released.release_quota(trial_book, count, job.team)
        if not trial_book.check(job.team, attempt.flavor, demand).verdict.admissible:
            return False
        trial = ledger.scratch()
        released.release_capacity(trial, count)
        return place_workload(trial, attempt.workload)[0].admitted

    count = first_fitting(len(ending), starts)
    if count is None:
        return None
    return max(ending[count - 1][0], now) if count else now
