"""The cohorts example: borrowing inside a sub-cohort, then across to its sibling within the
sub-cohort's borrow limit, and reclaim through two levels — read from the decision log."""

from __future__ import annotations

from tests.sim.conftest import SCENARIOS, entries, first
from topoq.sim import run_scenario


def test_a_sub_cohort_borrows_inside_then_across_within_its_limit_and_is_reclaimed() -> None:
    log = run_scenario(SCENARIOS / "cohorts.yaml").log
    lab = [e for e in entries(log, "admit") if e.team == "nlp-lab" and e.t == 0]
    assert [e.job for e in lab] == [f"lab-{n}" for n in range(1, 7)]  # 32 inside, 16 across
    wait = first(log, "wait", "lab-7")
    assert (wait.t, wait.reason) == (0, "BORROW_LIMIT_REACHED")
    assert "cohort research/language would take 24 nvidia.com/gpu from outside it" in (
        wait.message or ""
    )
    preempts = entries(log, "preempt")
    assert {(e.job, e.reason, e.for_job) for e in preempts} == {
        ("lab-5", "PREEMPTED_FOR_RECLAIM", "vision-train"),
        ("lab-6", "PREEMPTED_FOR_RECLAIM", "vision-train"),
    }  # the block where the gang then fits; vision lent across research what they run on
    assert first(log, "start", "vision-train").t == 600
