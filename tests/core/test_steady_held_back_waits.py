"""A job held back by its own team's quota hold, which would be admitted but for the holds,
names the quota hold from cycle to cycle — whether or not nodes held for a larger gang stand
in its way too. Node holds move to wherever a job just ended; before, such a job's wait
flipped between "team X holds quota for J" and "it fits only in capacity held for a larger
gang" with them, thousands of times over a few steps at 4,096 nodes, each flip a rewritten
diagnostic for the controller to commit and a changed reason for its user to read (ADR 0007).
On the cycle benchmark's workload, ten rounds of one job ending: many jobs wait for quota
holds while gangs hold nodes, and no job's wait goes from one kind to the other (before the
change, 5,886 did in these rounds)."""

from __future__ import annotations

from benchmarks.cycle import workload
from topoq.core.cycle import Snapshot, schedule_with_parking
from topoq.core.lifecycle import advance, apply_cycle
from topoq.domain.decisions import Diagnostic
from topoq.domain.job import JobPhase

QUOTA_HOLD = "holds quota for"
NODE_HOLD = "capacity held for a larger gang"


def kind(diagnostic: Diagnostic) -> str:
    if QUOTA_HOLD in diagnostic.message:
        return "quota hold"
    if NODE_HOLD in diagnostic.message:
        return "node hold"
    return "holding nodes" if "; holding " in diagnostic.message else "other"


def test_a_wait_for_the_team_s_quota_hold_does_not_flip_with_node_holds() -> None:
    tree, rules, jobs = workload(4096, 10_000)
    now = 10_000.0
    result, parking = schedule_with_parking(Snapshot(now, tree, tuple(jobs.values()), rules))
    jobs = apply_cycle(jobs, result, now=now, start_at_once=True)
    last: dict[str, str] = {}
    seen = dict.fromkeys(["quota hold", "node hold", "holding nodes", "other"], 0)
    flips = []
    for index in range(10):
        running = sorted(j for j, view in jobs.items() if view.phase is JobPhase.RUNNING)
        ended = running[(len(running) // 2 + 7 * index) % len(running)]
        jobs[ended] = advance(jobs[ended], JobPhase.SUCCEEDED, now=now, cause="exited 0")
        now += 1
        snapshot = Snapshot(now, tree, tuple(jobs.values()), rules)
        result, parking = schedule_with_parking(snapshot, parking)
        for diagnostic in result.diagnostics:
            now_kind = kind(diagnostic)
            seen[now_kind] += 1
            before = last.get(diagnostic.job)
            if {before, now_kind} == {"quota hold", "node hold"}:
                flips.append((index, diagnostic.job, before, now_kind))
            last[diagnostic.job] = now_kind
        jobs = apply_cycle(jobs, result, now=now, start_at_once=True)
    # waits for quota holds, and gangs that hold nodes (a domain each) against smaller jobs
    assert seen["quota hold"] > 1000 and seen["holding nodes"] > 0, seen
    assert flips == [], (len(flips), flips[:5])
