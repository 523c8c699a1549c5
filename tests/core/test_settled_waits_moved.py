"""A team settled again takes its jobs' waits whole from the last cycle but for the classes
whose wait's identity moved since (``state._wait_anew``): on a busy queue (50 teams, 3,000
pending on 512 nodes, cycles after one job ended) every diagnostic is the one a cycle that
looks at each job gives, and the moved classes are really met."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.cycle import workload
from topoq.core.cycle import Parking, Snapshot, schedule_with_parking, state
from topoq.core.lifecycle import advance, apply_cycle
from topoq.domain.decisions import Diagnostic
from topoq.domain.job import JobPhase


def _by_job(diagnostic: Diagnostic) -> str:
    return diagnostic.job


def test_waits_taken_whole_but_for_moved_classes_are_those_worked_out_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worked_anew: list[int] = []
    wait_anew = state._wait_anew

    def counted(failed, rest, moved, parked, said):  # type: ignore[no-untyped-def]
        worked_anew.append(len(moved))
        wait_anew(failed, rest, moved, parked, said)

    monkeypatch.setattr(state, "_wait_anew", counted)
    tree, rules, jobs = workload(512, 3000)
    now = 3000.0
    whole: Parking | None = None
    one_by_one: Parking | None = None
    for round_number in range(12):
        snapshot = Snapshot(now, tree, tuple(jobs.values()), rules)
        result, whole = schedule_with_parking(snapshot, whole)
        if one_by_one is not None:
            one_by_one = replace(one_by_one, carried=replace(one_by_one.carried, settled={}))
        looked_at, one_by_one = schedule_with_parking(snapshot, one_by_one)
        assert result.admissions == looked_at.admissions
        assert result.preemptions == looked_at.preemptions
        assert sorted(result.diagnostics, key=_by_job) == sorted(looked_at.diagnostics, key=_by_job)
        jobs = apply_cycle(jobs, result, now=now, start_at_once=True)
        running = sorted(j for j, v in jobs.items() if v.phase is JobPhase.RUNNING)
        ended = running[(len(running) // 2 + 7 * round_number) % len(running)]
        jobs[ended] = advance(jobs[ended], JobPhase.SUCCEEDED, now=now, cause="exited 0")
    assert worked_anew, "no settled team had a class whose wait moved: the path was not met"
